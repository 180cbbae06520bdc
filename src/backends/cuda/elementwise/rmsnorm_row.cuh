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

// r from the kRmsnormRowThreads/32 warp partials of a row, summed in order.
__device__ __forceinline__ float rmsnorm_r(const float* partial, int hidden, float eps) {
  float total = 0.f;
#pragma unroll
  for (int i = 0; i < kRmsnormRowThreads / 32; ++i) total += partial[i];
  return 1.0f / sqrtf(total / float(hidden) + eps);
}

// r of a row one warp holds as the row kernel's threads: lane p's ss[k] is thread 8p + k's partial
// (its elements 256j + 8p + k, j ascending). The kernel's warp w is lanes 4w..4w+3, its warp_sum
// (xor 16, 8, 4, 2, 1 of the thread index) lanes xor 2, 1 then k xor 4, 2, 1: the same tree of
// adds; then its 8 warp sums in order. Every lane gets r.
__device__ __forceinline__ float rmsnorm_r_of_lanes(float (&ss)[8], int hidden, float eps) {
  static_assert(kRmsnormRowThreads == 256, "lane p plays threads 8p..8p+7");
#pragma unroll
  for (int k = 0; k < 8; ++k) ss[k] += __shfl_xor_sync(0xffffffffu, ss[k], 2);  // thread index xor 16
#pragma unroll
  for (int k = 0; k < 8; ++k) ss[k] += __shfl_xor_sync(0xffffffffu, ss[k], 1);  // xor 8
#pragma unroll
  for (int k = 0; k < 4; ++k) ss[k] += ss[k + 4];  // xor 4
  ss[0] += ss[2], ss[1] += ss[3];                   // xor 2
  ss[0] += ss[1];                                   // xor 1
  float partial[kRmsnormRowThreads / 32];
#pragma unroll
  for (int w = 0; w < kRmsnormRowThreads / 32; ++w) partial[w] = __shfl_sync(0xffffffffu, ss[0], 4 * w);
  return rmsnorm_r(partial, hidden, eps);
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

namespace striker::cuda {

// x = rmsnorm(h) of one row, formed by a whole block of exactly kRmsnormRowThreads threads in
// shared memory: the 1-token GEMVs that take the norm in front of their dot products (every CTA
// normalises the row itself after griddepcontrol.wait instead of waiting for a separate rmsnorm
// launch; hidden <= kBlockNormMaxHidden, hidden % 8 == 0, 16-byte aligned pointers).
constexpr int kBlockNormMaxHidden = 8 * kRmsnormRowThreads;  // one 8-value chunk per thread (Flint: 2048)

struct BlockNormSmem {
  __align__(16) float gamma[kBlockNormMaxHidden];
  __align__(16) bf16_t x[kBlockNormMaxHidden];
  float partial[kRmsnormRowThreads / 32];
};

// Before the wait (norm weights are no earlier kernel's output): thread c copies chunk c of gamma.
// No barrier: block_rmsnorm_row's first one publishes it.
__device__ __forceinline__ void block_norm_stage_gamma(const float* __restrict__ gamma, int hidden, BlockNormSmem& s) {
  const int c = int(threadIdx.x);
  if (c < hidden / 8) {
    const float4* g4 = reinterpret_cast<const float4*>(gamma);
    float4* d4 = reinterpret_cast<float4*>(s.gamma);
    d4[2 * c] = __ldg(g4 + 2 * c);
    d4[2 * c + 1] = __ldg(g4 + 2 * c + 1);
  }
}

// After the wait: s.x = rmsnorm(h) with the rmsnorm kernel's bits, op for op: thread i's sum of
// squares over elements i, i + 256, ... in that order (rmsnorm_partial, read from the staged raw
// row), rmsnorm_scale's reduction, rmsnorm_apply. Every thread of the block calls it; it ends with
// a barrier, so on return every thread may read all of s.x.
__device__ __forceinline__ void block_rmsnorm_row(const bf16_t* __restrict__ h, int hidden, float eps,
                                                  BlockNormSmem& s) {
  const int c = int(threadIdx.x);  // this thread's chunk (elements 8c..8c+7)
  const bool holds = c < hidden / 8;
  uint4* x4 = reinterpret_cast<uint4*>(s.x);
  uint4 raw = make_uint4(0u, 0u, 0u, 0u);
  if (holds) x4[c] = raw = load_from_l2(h + int64_t(c) * 8);  // h: the previous kernel's output
  __syncthreads();  // the raw row (and block_norm_stage_gamma's gamma) in shared memory
  const float ss = rmsnorm_partial(hidden, [&](int i) { return __bfloat162float(s.x[i]); });
  const float r = rmsnorm_scale(ss, hidden, eps, s.partial);  // two barriers: the raw row is read by now
  if (holds) {
    float f[8], y[8];
    unpack8(raw, f);
#pragma unroll
    for (int k = 0; k < 8; ++k) y[k] = rmsnorm_apply(f[k], r, s.gamma[8 * c + k]);
    x4[c] = pack8(y);
  }
  __syncthreads();  // the normalised row complete
}

}  // namespace striker::cuda
