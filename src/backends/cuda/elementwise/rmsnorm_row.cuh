// The arithmetic of one RMSNorm row (FLINT.md §4: r = 1/sqrt(mean(x²)+eps), y = bf16(bf16(x·r)·w)),
// shared by the rmsnorm kernel and the kernels that normalise their own input (the decode router),
// so that every place computes r with the same summation order and gets the same bits: thread i of
// the first kThreads takes elements i, i + kThreads, ...; lanes are reduced by warp_sum, then the
// kThreads/32 warp partials in order.
#pragma once
#include "backends/cuda/common/device_math.cuh"

namespace striker::cuda {

constexpr int kRmsnormRowThreads = 256;

// This thread's partial sum of squares (0 for threads >= kRmsnormRowThreads). `value(i)` gives
// element i as fp32.
template <class Value>
__device__ __forceinline__ float rmsnorm_partial_of(int thread, int hidden, Value value) {
  float ss = 0.f;
  if (thread < kRmsnormRowThreads)
    for (int i = thread; i < hidden; i += kRmsnormRowThreads) {
      const float v = value(i);
      ss += v * v;
    }
  return ss;
}
template <class Value>
__device__ __forceinline__ float rmsnorm_partial(int hidden, Value value) {
  return rmsnorm_partial_of(int(threadIdx.x), hidden, value);
}

// r from the sum of squares of a row (the warp partials summed in order, from 0).
__device__ __forceinline__ float rmsnorm_r_of_total(float total, int hidden, float eps) {
  return 1.0f / sqrtf(total / float(hidden) + eps);
}

// r from the kRmsnormRowThreads/32 warp partials of a row, summed in order.
__device__ __forceinline__ float rmsnorm_r(const float* partial, int hidden, float eps) {
  float total = 0.f;
#pragma unroll
  for (int i = 0; i < kRmsnormRowThreads / 32; ++i) total += partial[i];
  return rmsnorm_r_of_total(total, hidden, eps);
}

// r from every thread's partial (all threads of the block call it: it holds two barriers, so
// `partial` [kRmsnormRowThreads/32] in shared memory may be reused by the next call).
__device__ __forceinline__ float rmsnorm_scale(float ss, int hidden, float eps, float* partial) {
  ss = warp_sum(ss);
  if (threadIdx.x < kRmsnormRowThreads && (threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
  __syncthreads();
  const float r = rmsnorm_r(partial, hidden, eps);
  __syncthreads();
  return r;
}

__device__ __forceinline__ float rmsnorm_apply(float v, float r, float w) { return round_bf16(round_bf16(v * r) * w); }

}  // namespace striker::cuda
