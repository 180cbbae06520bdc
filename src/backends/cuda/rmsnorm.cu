#include "backends/cuda/rmsnorm.h"

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_math.cuh"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/norm_prologue.cuh"

namespace striker::cuda {
namespace {

constexpr int kThreads = kRmsVirtualThreads;  // the block is the 256-thread layout norm_prologue.cuh defines
constexpr int kGammaHead = 8;                 // gamma values per thread loaded before pdl_wait (all of 2048)

// One block per row. The row is read twice (sum of squares, then scale); the second read
// hits L1/L2 since a row is at most a few KiB. kEarly: the first kGammaHead gamma values of each
// thread are loaded between launch_dependents and wait (no kernel writes the norm weights), so
// their latency hides behind the previous kernel's tail; the arithmetic is unchanged.
template <bool kAdd, bool kEarly>
__global__ void __launch_bounds__(kThreads) rmsnorm_kernel(bf16_t* h, const bf16_t* __restrict__ delta,
                                                           const float* __restrict__ w, bf16_t* out, int hidden,
                                                           float eps) {
  float w_head[kGammaHead];
  if constexpr (kEarly) {
    pdl_launch_dependents();
#pragma unroll
    for (int p = 0; p < kGammaHead; ++p) {
      const int i = threadIdx.x + p * kThreads;
      // ld.global.cs, not __ldg: ptxas sinks ld.global.nc loads below griddepcontrol.wait (seen in
      // the SASS), which would undo the point of loading them early.
      w_head[p] = i < hidden ? __ldcs(w + i) : 0.f;
    }
    pdl_wait();
  } else {
    pdl_grid_start();  // see launch.cuh
  }
  const int64_t row = blockIdx.x;
  bf16_t* x = h + row * hidden;
  const bf16_t* d = kAdd ? delta + row * hidden : nullptr;
  bf16_t* y = out + row * hidden;
  __shared__ float partial[kRmsVirtualWarps];
  const float total = rms_sum_squares<kThreads>(
      hidden,
      [&](int i) {
        float v = __bfloat162float(x[i]);
        if constexpr (kAdd) {
          v = round_bf16(v + __bfloat162float(d[i]));
          x[i] = __float2bfloat16_rn(v);
        }
        return v;
      },
      partial);
  const float r = rms_inverse(total, hidden, eps);
  // Each thread re-reads only the elements it wrote itself, so no barrier is needed here.
  int i0 = threadIdx.x;
  if constexpr (kEarly) {
#pragma unroll
    for (int p = 0; p < kGammaHead; ++p) {
      const int i = threadIdx.x + p * kThreads;
      if (i < hidden) y[i] = rms_output(__bfloat162float(x[i]), r, w_head[p]);
    }
    i0 += kGammaHead * kThreads;
  }
  for (int i = i0; i < hidden; i += kThreads) y[i] = rms_output(__bfloat162float(x[i]), r, w[i]);
}

template <bool kAdd>
void launch_rmsnorm(const char* what, bf16_t* h, const bf16_t* delta, const float* w, bf16_t* out, int rows,
                    int hidden, float eps, bool early_weights, cudaStream_t stream) {
  if (rows <= 0) return;
  if (early_weights) launch_pdl(rmsnorm_kernel<kAdd, true>, dim3(rows), dim3(kThreads), 0, stream, h, delta, w, out, hidden, eps);
  else launch_pdl(rmsnorm_kernel<kAdd, false>, dim3(rows), dim3(kThreads), 0, stream, h, delta, w, out, hidden, eps);
  STRIKER_CUDA_CHECK_LAUNCH(what);
}

}  // namespace

void rmsnorm(const bf16* x, const float* w, bf16* out, int rows, int hidden, float eps, cudaStream_t stream,
             bool early_weights) {
  launch_rmsnorm<false>("rmsnorm", const_cast<bf16_t*>(reinterpret_cast<const bf16_t*>(x)), nullptr, w,
                        reinterpret_cast<bf16_t*>(out), rows, hidden, eps, early_weights, stream);
}

void add_rmsnorm(bf16* h, const bf16* delta, const float* w, bf16* out, int rows, int hidden, float eps,
                 cudaStream_t stream, bool early_weights) {
  launch_rmsnorm<true>("add_rmsnorm", reinterpret_cast<bf16_t*>(h), reinterpret_cast<const bf16_t*>(delta), w,
                       reinterpret_cast<bf16_t*>(out), rows, hidden, eps, early_weights, stream);
}

}  // namespace striker::cuda
