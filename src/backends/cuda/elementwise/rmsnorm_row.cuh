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
#include "backends/cuda/common/tensor_core.cuh"
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

// One warp normalises a whole row with the rmsnorm kernel's bits, reading it with 16-byte loads.
// Lane p loads the 8-element vectors q = p, p + 32, ...: vector q holds element 256j + 8p + k of
// the kernel's thread 8p + k (k < 8), so lane p sums the squares of threads 8p..8p+7 completely, each
// in the kernel's order (j ascending, rmsnorm_partial_of). The kernel's warp w (threads 32w..32w+31)
// lives in lanes 4w..4w+3; its warp_sum butterfly (xor 16, 8, 4, 2, 1 on the thread index) is
// xor 2 and xor 1 on the lane, then xor 4, 2, 1 on k inside the lane: the same tree of adds, so the
// same sum. rmsnorm_r then adds the 8 warp sums in order. One round trip of loads per 8 KiB of row
// per lane instead of one per 512 bytes with a thread per element. hidden % 8 == 0.
__device__ __forceinline__ void rmsnorm_row_warp(const bf16_t* h_row, int hidden, float eps,
                                                 const float* __restrict__ gamma, bf16_t* out_row) {
  static_assert(kRmsnormRowThreads == 256, "lane p plays threads 8p..8p+7");
  const int lane = int(threadIdx.x & 31), nvec = hidden / 8;
  float ss[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) ss[k] = 0.f;
#pragma unroll 8
  for (int q = lane; q < nvec; q += 32) {
    float f[8];
    unpack8(load_coherent(h_row + int64_t(q) * 8), f);
#pragma unroll
    for (int k = 0; k < 8; ++k) ss[k] += f[k] * f[k];
  }
#pragma unroll
  for (int k = 0; k < 8; ++k) ss[k] += __shfl_xor_sync(0xffffffffu, ss[k], 2);  // thread index xor 16
#pragma unroll
  for (int k = 0; k < 8; ++k) ss[k] += __shfl_xor_sync(0xffffffffu, ss[k], 1);  // xor 8
  const float a0 = ss[0] + ss[4], a1 = ss[1] + ss[5], a2 = ss[2] + ss[6], a3 = ss[3] + ss[7];  // xor 4
  const float total = (a0 + a2) + (a1 + a3);                                                  // xor 2, 1
  float partial[kRmsnormRowThreads / 32];
#pragma unroll
  for (int w = 0; w < kRmsnormRowThreads / 32; ++w) partial[w] = __shfl_sync(0xffffffffu, total, 4 * w);
  const float r = rmsnorm_r(partial, hidden, eps);
#pragma unroll 8
  for (int q = lane; q < nvec; q += 32) {
    float f[8];
    unpack8(load_coherent(h_row + int64_t(q) * 8), f);
    const float4 g0 = __ldg(reinterpret_cast<const float4*>(gamma) + 2 * q);
    const float4 g1 = __ldg(reinterpret_cast<const float4*>(gamma) + 2 * q + 1);
    const float g[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
    uint32_t o[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      o[k] = pack_bf16x2(rmsnorm_apply(f[2 * k], r, g[2 * k]), rmsnorm_apply(f[2 * k + 1], r, g[2 * k + 1]));
    *reinterpret_cast<uint4*>(out_row + int64_t(q) * 8) = make_uint4(o[0], o[1], o[2], o[3]);
  }
}

// The next layer's input norm computed once, where a decode kernel produced the new residual
// stream h [rows, hidden]: every CTA arrives on `counter` after its last store of h, and the CTA
// that arrives last normalises the rows, one warp per row (rmsnorm_row_warp: the rmsnorm kernel's
// bits), reading h from L2. A norm recomputed by every CTA cost more than its kernel boundary
// (docs/performance.md, issue 11); this one costs the last CTA two L2 round trips of 16-byte loads
// per row (sum of squares, then scale) and one of stores.
struct LastBlockNorm {
  const float* gamma = nullptr;  // [hidden] fp32; null: no norm
  float eps = 0.f;
  bf16_t* out = nullptr;             // [rows, hidden], apart from h
  unsigned int* counter = nullptr;   // zero-initialised, left zero (common/last_block.cuh)
};

// Called at the kernel's start (before its wait: the weights do not depend on earlier kernels):
// CTA b asks L2 for the 128-byte line b of gamma, so the last CTA's scale pass does not wait on HBM.
__device__ __forceinline__ void last_block_norm_prefetch(const LastBlockNorm& n, int hidden) {
  const unsigned int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  if (n.gamma != nullptr && threadIdx.x == 0 && int64_t(b) * 32 < hidden)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(n.gamma + int64_t(b) * 32));
}

// Called by every thread of every CTA of the grid, after its last store of h.
__device__ __forceinline__ void last_block_norm(const LastBlockNorm& n, const bf16_t* h, int rows, int hidden) {
  if (n.gamma == nullptr) return;
  if (!last_block_arrive(n.counter, gridDim.x * gridDim.y * gridDim.z)) return;
  const int warps = int(blockDim.x >> 5);
  for (int t = int(threadIdx.x >> 5); t < rows; t += warps)
    rmsnorm_row_warp(h + int64_t(t) * hidden, hidden, n.eps, n.gamma, n.out + int64_t(t) * hidden);
}

// The device form of a host RowNorm (null: none), checked: weights, an output and a counter.
// `what` names the caller in the error.
inline LastBlockNorm last_block_norm_of(const RowNorm* n, int hidden, const char* what) {
  if (n == nullptr) return {};
  if (hidden % 8 != 0 || reinterpret_cast<uintptr_t>(n->gamma) % 16 != 0 || reinterpret_cast<uintptr_t>(n->out) % 16 != 0)
    throw Error(std::string(what) + ": the next-layer norm needs a width that is a multiple of 8 and 16-byte aligned "
                "weights and output");
  if (n->gamma == nullptr || n->out == nullptr || n->counter == nullptr)
    throw Error(std::string(what) + ": the next-layer norm needs its weights, an output and a last-block counter");
  return LastBlockNorm{n->gamma, n->eps, reinterpret_cast<bf16_t*>(n->out), n->counter};
}

}  // namespace striker::cuda
