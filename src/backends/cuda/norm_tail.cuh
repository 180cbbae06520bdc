// The device side of NormAfter (rmsnorm.h): the last block of a grid that updated h computes
// out = rmsnorm(h, w) for T rows, with the arithmetic of rmsnorm.cu's kernel (256 threads, the
// same per-thread strides and reduction order), so the result is bit-identical to rmsnorm().
#pragma once
#include <string>

#include "backends/cuda/device_math.cuh"
#include "backends/cuda/rmsnorm.h"
#include "core/error.h"

namespace striker::cuda {

struct NormTail {
  const float* w = nullptr;  // nullptr: no norm after this launch
  bf16_t* out = nullptr;
  float eps = 0.f;
  unsigned* done = nullptr;
};

// Host side: NormAfter -> kernel argument (empty when no norm is asked for).
inline NormTail norm_tail(const char* what, const NormAfter& a, int T, int max_tokens) {
  if (a.weight == nullptr) return {};
  if (a.out == nullptr || a.done == nullptr || T > max_tokens)
    throw Error(std::string(what) + ": a fused norm needs an output, a block counter and at most " +
                std::to_string(max_tokens) + " tokens");
  return NormTail{a.weight, reinterpret_cast<bf16_t*>(a.out), a.eps, a.done};
}

// Every thread of every block must call this (no early return before it), after its last write
// to h. kThreads must equal the block size and rmsnorm.cu's kThreads (256) for bit-identity.
template <int kThreads>
__device__ __forceinline__ void last_block_rmsnorm(const bf16_t* h, int T, int hidden, const NormTail& n) {
  static_assert(kThreads == 256, "the reduction order must match rmsnorm.cu's 256-thread kernel");
  if (n.w == nullptr) return;  // uniform over the grid
  __shared__ bool last;
  __shared__ float partial[kThreads / 32];
  __threadfence();  // this block's h writes are visible device-wide before it counts itself done
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(n.done, 1u) == gridDim.x * gridDim.y * gridDim.z - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();  // every other block fenced its h writes before counting
  for (int t = 0; t < T; ++t) {
    const unsigned short* x = reinterpret_cast<const unsigned short*>(h + int64_t(t) * hidden);
    float ss = 0.f;
    for (int i = threadIdx.x; i < hidden; i += kThreads) {
      const float v = __bfloat162float(__ushort_as_bfloat16(__ldcg(x + i)));  // L2: other blocks wrote h
      ss += v * v;
    }
    ss = warp_sum(ss);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
    __syncthreads();
    float total = 0.f;
#pragma unroll
    for (int i = 0; i < kThreads / 32; ++i) total += partial[i];
    const float r = 1.0f / sqrtf(total / float(hidden) + n.eps);
    bf16_t* y = n.out + int64_t(t) * hidden;
    for (int i = threadIdx.x; i < hidden; i += kThreads) {
      const float v = __bfloat162float(__ushort_as_bfloat16(__ldcg(x + i)));
      y[i] = __float2bfloat16_rn(round_bf16(v * r) * n.w[i]);
    }
    __syncthreads();  // partial is reused by the next row
  }
  if (threadIdx.x == 0) *n.done = 0u;
}

}  // namespace striker::cuda
