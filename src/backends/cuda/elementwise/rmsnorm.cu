#include "backends/cuda/elementwise/rmsnorm.h"

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/elementwise/rmsnorm_row.cuh"

namespace striker::cuda {
namespace {

constexpr int kThreads = kRmsnormRowThreads;

// One block per row. The row is read twice (sum of squares, then scale); the second read
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

}  // namespace

void rmsnorm(const bf16* x, const float* w, bf16* out, int rows, int hidden, float eps, cudaStream_t stream) {
  if (rows <= 0) return;
  launch_pdl(rmsnorm_kernel<false>, dim3(rows), dim3(kThreads), 0, stream, 
      const_cast<bf16_t*>(reinterpret_cast<const bf16_t*>(x)), nullptr, w, reinterpret_cast<bf16_t*>(out), hidden, eps);
  STRIKER_CUDA_CHECK_LAUNCH("rmsnorm");
}

void add_rmsnorm(bf16* h, const bf16* delta, const float* w, bf16* out, int rows, int hidden, float eps,
                 cudaStream_t stream) {
  if (rows <= 0) return;
  launch_pdl(rmsnorm_kernel<true>, dim3(rows), dim3(kThreads), 0, stream, reinterpret_cast<bf16_t*>(h),
                                                      reinterpret_cast<const bf16_t*>(delta), w,
                                                      reinterpret_cast<bf16_t*>(out), hidden, eps);
  STRIKER_CUDA_CHECK_LAUNCH("add_rmsnorm");
}

}  // namespace striker::cuda
