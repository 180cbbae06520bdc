// The arithmetic of one RMSNorm row (FLINT.md §4: r = 1/sqrt(mean(x²)+eps), y = bf16(bf16(x·r)·w)),
// shared by the rmsnorm kernel and the kernels that normalise their own input (the decode router),
// so that every place computes r with the same summation order and gets the same bits: thread i of
// the first kThreads takes elements i, i + kThreads, ...; lanes are reduced by warp_sum, then the
// kThreads/32 warp partials in order.
#pragma once
#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/common/last_block.cuh"
#include "backends/cuda/elementwise/rmsnorm.h"

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

// r from the kRmsnormRowThreads/32 warp partials of a row, summed in order.
__device__ __forceinline__ float rmsnorm_r(const float* partial, int hidden, float eps) {
  float total = 0.f;
#pragma unroll
  for (int i = 0; i < kRmsnormRowThreads / 32; ++i) total += partial[i];
  return 1.0f / sqrtf(total / float(hidden) + eps);
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

// One warp normalises a whole row with the rmsnorm kernel's bits: lane l plays the kernel's threads
// l, l + 32, ..., l + 224 (thread 32w + l sums elements 32w + l, 32w + l + 256, ... in order, as
// rmsnorm_partial_of does), each group w is reduced by warp_sum like the kernel's warp w, and the
// kRmsnormRowThreads/32 group totals are added in order by rmsnorm_r. So a CTA's warps can
// normalise up to one row each in parallel (the last-CTA epilogue below) where the rmsnorm kernel
// takes a CTA per row. `load(i)`: element i as fp32; `store(i, y)`: y = the normalised element i.
template <class Load, class Store>
__device__ __forceinline__ void rmsnorm_row_warp(int hidden, float eps, const float* __restrict__ gamma, Load load,
                                                 Store store) {
  constexpr int kGroups = kRmsnormRowThreads / 32;
  const int lane = int(threadIdx.x & 31);
  float ss[kGroups];
#pragma unroll
  for (int g = 0; g < kGroups; ++g) ss[g] = 0.f;
  // Round j loads element 256j + 32g + lane of every group at once (8 loads in flight per round),
  // and adds each to its group's sum: per group the same sequence of adds as the kernel's thread.
#pragma unroll 2
  for (int base = lane; base < hidden; base += kRmsnormRowThreads) {
    float v[kGroups];
#pragma unroll
    for (int g = 0; g < kGroups; ++g) v[g] = base + 32 * g < hidden ? load(base + 32 * g) : 0.f;
#pragma unroll
    for (int g = 0; g < kGroups; ++g)
      if (base + 32 * g < hidden) ss[g] += v[g] * v[g];
  }
#pragma unroll
  for (int g = 0; g < kGroups; ++g) ss[g] = warp_sum(ss[g]);
  const float r = rmsnorm_r(ss, hidden, eps);
#pragma unroll 8
  for (int i = lane; i < hidden; i += 32) store(i, rmsnorm_apply(load(i), r, gamma[i]));
}

// The next layer's input norm computed once, where a decode kernel produced the new residual
// stream h [rows, hidden]: every CTA arrives on `counter` after its last store of h, and the CTA
// that arrives last normalises the rows, one warp per row (rmsnorm_row_warp: the rmsnorm kernel's
// bits), reading h from L2. A norm recomputed by every CTA cost more than its kernel boundary
// (docs/performance.md, issue 11); this one costs the last CTA one pass over rows · hidden · 2 bytes.
struct LastBlockNorm {
  const float* gamma = nullptr;  // [hidden] fp32; null: no norm
  float eps = 0.f;
  bf16_t* out = nullptr;             // [rows, hidden], apart from h
  unsigned int* counter = nullptr;   // zero-initialised, left zero (common/last_block.cuh)
};

// Called by every thread of every CTA of the grid, after its last store of h.
__device__ __forceinline__ void last_block_norm(const LastBlockNorm& n, const bf16_t* h, int rows, int hidden) {
  if (n.gamma == nullptr) return;
  if (!last_block_arrive(n.counter, gridDim.x * gridDim.y * gridDim.z)) return;
  const int warps = int(blockDim.x >> 5);
  for (int t = int(threadIdx.x >> 5); t < rows; t += warps) {
    const auto* hr = reinterpret_cast<const unsigned short*>(h + int64_t(t) * hidden);
    bf16_t* y = n.out + int64_t(t) * hidden;
    rmsnorm_row_warp(
        hidden, n.eps, n.gamma, [&](int i) { return __uint_as_float(uint32_t(__ldcg(hr + i)) << 16); },
        [&](int i, float v) { y[i] = __float2bfloat16_rn(v); });
  }
}

// The device form of a host RowNorm (null: none), checked: weights, an output and a counter.
// `what` names the caller in the error.
inline LastBlockNorm last_block_norm_of(const RowNorm* n, const char* what) {
  if (n == nullptr) return {};
  if (n->gamma == nullptr || n->out == nullptr || n->counter == nullptr)
    throw Error(std::string(what) + ": the next-layer norm needs its weights, an output and a last-block counter");
  return LastBlockNorm{n->gamma, n->eps, reinterpret_cast<bf16_t*>(n->out), n->counter};
}

}  // namespace striker::cuda
