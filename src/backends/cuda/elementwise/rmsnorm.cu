#include "backends/cuda/elementwise/rmsnorm.h"

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/elementwise/rmsnorm_row.cuh"

namespace striker::cuda {
namespace {

constexpr int kThreads = kRmsnormRowThreads;

// One block per row (rows wider than rmsnorm_held_kernel holds). The row is read twice (sum of squares, then scale); the second read
// hits L1/L2 since a row is at most a few KiB. The arithmetic is rmsnorm_row.cuh's.
template <bool kAdd>
__global__ void __launch_bounds__(kThreads) rmsnorm_kernel(bf16_t* h, const bf16_t* __restrict__ delta,
                                                           const float* __restrict__ w, bf16_t* out, int hidden,
                                                           float eps) {
  pdl_grid_start();  // see launch.cuh
  const int64_t row = blockIdx.x;
  bf16_t* x = h + row * hidden;
  const bf16_t* d = kAdd ? delta + row * hidden : nullptr;
  bf16_t* y = out + row * hidden;
  const float ss = rmsnorm_partial(hidden, [&](int i) {
    float v = __bfloat162float(x[i]);
    if constexpr (kAdd) {
      v = round_bf16(v + __bfloat162float(d[i]));
      x[i] = __float2bfloat16_rn(v);
    }
    return v;
  });
  __shared__ float partial[kThreads / 32];
  const float r = rmsnorm_scale(ss, hidden, eps, partial);
  // Each thread re-reads only the elements it wrote itself, so no barrier is needed here.
  for (int i = threadIdx.x; i < hidden; i += kThreads)
    y[i] = __float2bfloat16_rn(rmsnorm_apply(__bfloat162float(x[i]), r, w[i]));
}

// Rows of up to kHeld·kThreads values (Flint's 2048): each thread loads all of its values
// (i, i + kThreads, ..., rmsnorm_row.cuh's assignment) into registers before using any, so a
// thread has its 8 loads in flight at once instead of one per loop trip, and the row is read
// once. The same per-thread order of the sum of squares as rmsnorm_partial: the same bits.
constexpr int kHeld = 16;

template <bool kAdd>
__global__ void __launch_bounds__(kThreads) rmsnorm_held_kernel(bf16_t* h, const bf16_t* __restrict__ delta,
                                                                const float* __restrict__ w, bf16_t* out, int hidden,
                                                                float eps) {
  pdl_grid_start();  // see launch.cuh
  const int64_t row = blockIdx.x;
  bf16_t* x = h + row * hidden;
  bf16_t* y = out + row * hidden;
  float v[kHeld];
#pragma unroll
  for (int k = 0; k < kHeld; ++k) {
    const int i = int(threadIdx.x) + k * kThreads;
    v[k] = i < hidden ? __bfloat162float(x[i]) : 0.f;
  }
  if constexpr (kAdd) {
    const bf16_t* d = delta + row * hidden;
#pragma unroll
    for (int k = 0; k < kHeld; ++k) {
      const int i = int(threadIdx.x) + k * kThreads;
      if (i < hidden) {
        v[k] = round_bf16(v[k] + __bfloat162float(d[i]));
        x[i] = __float2bfloat16_rn(v[k]);
      }
    }
  }
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < kHeld; ++k)
    if (int(threadIdx.x) + k * kThreads < hidden) ss += v[k] * v[k];  // rmsnorm_partial's order
  __shared__ float partial[kThreads / 32];
  const float r = rmsnorm_scale(ss, hidden, eps, partial);
#pragma unroll
  for (int k = 0; k < kHeld; ++k) {
    const int i = int(threadIdx.x) + k * kThreads;
    if (i < hidden) y[i] = __float2bfloat16_rn(rmsnorm_apply(v[k], r, w[i]));
  }
}

template <bool kAdd>
void launch_rmsnorm(bf16_t* h, const bf16_t* delta, const float* w, bf16_t* out, int rows, int hidden, float eps,
                    cudaStream_t stream) {
  if (hidden <= kHeld * kThreads)
    launch_pdl(rmsnorm_held_kernel<kAdd>, dim3(rows), dim3(kThreads), 0, stream, h, delta, w, out, hidden, eps);
  else
    launch_pdl(rmsnorm_kernel<kAdd>, dim3(rows), dim3(kThreads), 0, stream, h, delta, w, out, hidden, eps);
}

}  // namespace

void rmsnorm(const bf16* x, const float* w, bf16* out, int rows, int hidden, float eps, cudaStream_t stream) {
  if (rows <= 0) return;
  launch_rmsnorm<false>(const_cast<bf16_t*>(reinterpret_cast<const bf16_t*>(x)), nullptr, w,
                        reinterpret_cast<bf16_t*>(out), rows, hidden, eps, stream);
  STRIKER_CUDA_CHECK_LAUNCH("rmsnorm");
}

void add_rmsnorm(bf16* h, const bf16* delta, const float* w, bf16* out, int rows, int hidden, float eps,
                 cudaStream_t stream) {
  if (rows <= 0) return;
  launch_rmsnorm<true>(reinterpret_cast<bf16_t*>(h), reinterpret_cast<const bf16_t*>(delta), w,
                       reinterpret_cast<bf16_t*>(out), rows, hidden, eps, stream);
  STRIKER_CUDA_CHECK_LAUNCH("add_rmsnorm");
}

}  // namespace striker::cuda
