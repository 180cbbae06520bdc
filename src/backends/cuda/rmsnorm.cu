#include "backends/cuda/rmsnorm.h"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/device_math.cuh"

namespace striker::cuda {
namespace {

constexpr int kThreads = 256;

// What is added to h in front of the norm: nothing, a bf16 delta row, or the MoE combine of a
// token's K+1 expert outputs (moe_cluster in moe.h).
enum class Delta { none, add, moe };

// The MoE output of element i of one token: bf16(bf16(Σ_k w_k·y_k, fmaf in k order) + y_K), with
// exactly moe_down_kernel's rounding points. ys: the token's [K+1, hidden] slots; tw: its K weights.
__device__ __forceinline__ float moe_combined(const bf16_t* ys, const float* tw, int K, bool shared, int hidden,
                                              int i) {
  float sum = 0.f;
  for (int k = 0; k < K; ++k) sum = fmaf(tw[k], __bfloat162float(ys[int64_t(k) * hidden + i]), sum);
  float y = round_bf16(sum);
  if (shared) y = round_bf16(y + __bfloat162float(ys[int64_t(K) * hidden + i]));
  return y;
}

// One block per row. The row is read twice (sum of squares, then scale); the second read
// hits L1/L2 since a row is at most a few KiB. kDelta == moe: delta is y_slots [rows, K+1, hidden].
template <Delta kDelta>
__global__ void __launch_bounds__(kThreads) rmsnorm_kernel(bf16_t* h, const bf16_t* __restrict__ delta,
                                                           const float* __restrict__ topk_w, int K, bool shared,
                                                           const float* __restrict__ w, bf16_t* out, int hidden,
                                                           float eps) {
  pdl_grid_start();  // see launch.cuh
  const int64_t row = blockIdx.x;
  bf16_t* x = h + row * hidden;
  const bf16_t* d = kDelta == Delta::add ? delta + row * hidden
                    : kDelta == Delta::moe ? delta + row * (K + 1) * hidden
                                           : nullptr;
  bf16_t* y = out + row * hidden;
  float ss = 0.f;
  for (int i = threadIdx.x; i < hidden; i += kThreads) {
    float v = __bfloat162float(x[i]);
    if constexpr (kDelta == Delta::add) {
      v = round_bf16(v + __bfloat162float(d[i]));
      x[i] = __float2bfloat16_rn(v);
    } else if constexpr (kDelta == Delta::moe) {
      v = round_bf16(v + moe_combined(d, topk_w + row * K, K, shared, hidden, i));
      x[i] = __float2bfloat16_rn(v);
    }
    ss += v * v;
  }
  __shared__ float partial[kThreads / 32];
  ss = warp_sum(ss);
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.f;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) total += partial[i];
  const float r = 1.0f / sqrtf(total / float(hidden) + eps);
  // Each thread re-reads only the elements it wrote itself, so no barrier is needed here.
  for (int i = threadIdx.x; i < hidden; i += kThreads) {
    const float v = __bfloat162float(x[i]);
    y[i] = __float2bfloat16_rn(round_bf16(v * r) * w[i]);
  }
}

// h = bf16(h + moe_combined(...)) without a norm (after the last layer). grid (ceil(hidden/256), rows).
__global__ void __launch_bounds__(kThreads) moe_combine_kernel(bf16_t* h, const bf16_t* __restrict__ y_slots,
                                                               const float* __restrict__ topk_w, int K, bool shared,
                                                               int hidden) {
  pdl_grid_start();  // see launch.cuh
  const int64_t row = blockIdx.y;
  const int i = int(blockIdx.x) * kThreads + int(threadIdx.x);
  if (i >= hidden) return;
  const float y = moe_combined(y_slots + row * (K + 1) * hidden, topk_w + row * K, K, shared, hidden, i);
  bf16_t& hv = h[row * hidden + i];
  hv = __float2bfloat16_rn(__bfloat162float(hv) + y);
}

void check_moe_slots(const char* what, int rows, int K) {
  if (K <= 0 || K > 8) throw Error(std::string(what) + ": top-k " + std::to_string(K) + " is not in 1..8");
  if (rows > 65535) throw Error(std::string(what) + ": " + std::to_string(rows) + " rows exceed one launch (65535)");
}

}  // namespace

void rmsnorm(const bf16* x, const float* w, bf16* out, int rows, int hidden, float eps, cudaStream_t stream) {
  if (rows <= 0) return;
  launch_pdl(rmsnorm_kernel<Delta::none>, dim3(rows), dim3(kThreads), 0, stream,
             const_cast<bf16_t*>(reinterpret_cast<const bf16_t*>(x)), nullptr, nullptr, 0, false, w, reinterpret_cast<bf16_t*>(out), hidden, eps);
  STRIKER_CUDA_CHECK_LAUNCH("rmsnorm");
}

void add_rmsnorm(bf16* h, const bf16* delta, const float* w, bf16* out, int rows, int hidden, float eps,
                 cudaStream_t stream) {
  if (rows <= 0) return;
  launch_pdl(rmsnorm_kernel<Delta::add>, dim3(rows), dim3(kThreads), 0, stream, reinterpret_cast<bf16_t*>(h),
             reinterpret_cast<const bf16_t*>(delta), nullptr, 0, false, w,
                                                      reinterpret_cast<bf16_t*>(out), hidden, eps);
  STRIKER_CUDA_CHECK_LAUNCH("add_rmsnorm");
}

}  // namespace striker::cuda

namespace striker::cuda {

void moe_combine_rmsnorm(bf16* h, const bf16* y_slots, const float* topk_w, int rows, int K, bool has_shared,
                         const float* w, bf16* out, int hidden, float eps, cudaStream_t stream) {
  if (rows <= 0) return;
  check_moe_slots("moe_combine_rmsnorm", rows, K);
  launch_pdl(rmsnorm_kernel<Delta::moe>, dim3(rows), dim3(kThreads), 0, stream, reinterpret_cast<bf16_t*>(h),
             reinterpret_cast<const bf16_t*>(y_slots), topk_w, K, has_shared, w, reinterpret_cast<bf16_t*>(out),
             hidden, eps);
  STRIKER_CUDA_CHECK_LAUNCH("moe_combine_rmsnorm");
}

void moe_combine(bf16* h, const bf16* y_slots, const float* topk_w, int rows, int K, bool has_shared, int hidden,
                 cudaStream_t stream) {
  if (rows <= 0) return;
  check_moe_slots("moe_combine", rows, K);
  launch_pdl(moe_combine_kernel, dim3(unsigned((hidden + kThreads - 1) / kThreads), unsigned(rows)), dim3(kThreads),
             0, stream, reinterpret_cast<bf16_t*>(h), reinterpret_cast<const bf16_t*>(y_slots), topk_w, K, has_shared,
             hidden);
  STRIKER_CUDA_CHECK_LAUNCH("moe_combine");
}

}  // namespace striker::cuda
