// The inner loop every GEMV-style kernel shares: one warp computes R dot products (R weight rows,
// each against its own activation row, for up to NT tokens) with 16-byte streaming loads of the
// weights. Results are lane-partial; the caller reduces them with warp_sum.
#pragma once
#include "backends/cuda/device_math.cuh"

namespace striker::cuda {

// 16 bytes of activations: from global memory through the read-only cache, or from shared memory
// (kernels that computed their input themselves, e.g. a fused RMSNorm).
template <bool kSharedX>
__device__ __forceinline__ uint4 load_x(const bf16_t* p) {
  if constexpr (kSharedX) return *reinterpret_cast<const uint4*>(p);
  else return load_cached(p);
}

// One 16-byte chunk c of each of the R rows (weights already in registers) against the tokens.
template <int R, int NT, bool kSharedX>
__device__ __forceinline__ void warp_dot_chunk(const uint4 (&wq)[R], const bf16_t* const (&x)[R], int64_t x_stride,
                                               int nt, int c, float (&acc)[R][NT]) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    float wf[8];
    unpack8(wq[r], wf);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t < nt) {
        float xf[8];
        unpack8(load_x<kSharedX>(x[r] + t * x_stride + int64_t(c) * 8), xf);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[r][t] = fmaf(wf[i], xf[i], acc[r][t]);
      }
    }
  }
}

// Chunks c_begin, c_begin + step, ... < in/8, accumulated onto acc (no zeroing, no reduction).
template <int R, int NT, bool kSharedX>
__device__ __forceinline__ void warp_dot_range(const bf16_t* const (&w)[R], const bf16_t* const (&x)[R],
                                               int64_t x_stride, int nt, int in, float (&acc)[R][NT], int c_begin,
                                               int step) {
  const int chunks = in / 8;
  // Single-token passes unroll deeper: more independent 16-byte loads in flight per lane.
#pragma unroll(NT == 1 ? 4 : 2)
  for (int c = c_begin; c < chunks; c += step) {
    uint4 wq[R];
#pragma unroll
    for (int r = 0; r < R; ++r) wq[r] = load_stream(w[r] + int64_t(c) * 8);
    warp_dot_chunk<R, NT, kSharedX>(wq, x, x_stride, nt, c, acc);
  }
}

template <int R, int NT>
__device__ __forceinline__ void warp_dot_zero(float (&acc)[R][NT]) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.f;
}

template <int R, int NT>
__device__ __forceinline__ void warp_dot_reduce(float (&acc)[R][NT]) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = warp_sum(acc[r][t]);
}

// w[r]: weight row r (in bf16 values, 16-byte aligned). x[r]: activations for row r, token t at
// x[r] + t*x_stride. nt <= NT tokens are live. in % 8 == 0. With split-K, `part` of `parts`
// warps share the rows: this warp takes 16-byte chunks part*32+lane, stepping 32*parts.
template <int R, int NT, bool kSharedX = false>
__device__ __forceinline__ void warp_dot(const bf16_t* const (&w)[R], const bf16_t* const (&x)[R], int64_t x_stride,
                                         int nt, int in, float (&acc)[R][NT], int part = 0, int parts = 1) {
  const int lane = threadIdx.x & 31;
  warp_dot_zero(acc);
  warp_dot_range<R, NT, kSharedX>(w, x, x_stride, nt, in, acc, part * 32 + lane, 32 * parts);
  warp_dot_reduce(acc);
}

// The first kHead chunks of this lane's R weight rows (the chunks warp_dot would load first),
// held in registers. Loaded before pdl_wait (DecodeTweaks::early_weights): weights are written by
// no kernel, so their DRAM latency overlaps the previous kernel's tail.
template <int R, int kHead>
struct WeightHead {
  uint4 q[kHead][R];
};

template <int R, int kHead>
__device__ __forceinline__ void load_weight_head(const bf16_t* const (&w)[R], int in, WeightHead<R, kHead>& head,
                                                 int part = 0, int parts = 1) {
  const int c0 = part * 32 + (threadIdx.x & 31);
#pragma unroll
  for (int p = 0; p < kHead; ++p) {
    const int c = c0 + p * 32 * parts;
#pragma unroll
    for (int r = 0; r < R; ++r)
      head.q[p][r] = c < in / 8 ? load_stream(w[r] + int64_t(c) * 8) : make_uint4(0u, 0u, 0u, 0u);
  }
}

// warp_dot with its first kHead chunks taken from `head`: the same chunks in the same order, so
// the same fmaf chain per lane and bit-identical sums.
template <int R, int NT, int kHead, bool kSharedX = false>
__device__ __forceinline__ void warp_dot_primed(const bf16_t* const (&w)[R], const bf16_t* const (&x)[R],
                                                int64_t x_stride, int nt, int in, float (&acc)[R][NT],
                                                const WeightHead<R, kHead>& head, int part = 0, int parts = 1) {
  const int c0 = part * 32 + (threadIdx.x & 31), step = 32 * parts;
  warp_dot_zero(acc);
#pragma unroll
  for (int p = 0; p < kHead; ++p)
    if (c0 + p * step < in / 8) warp_dot_chunk<R, NT, kSharedX>(head.q[p], x, x_stride, nt, c0 + p * step, acc);
  warp_dot_range<R, NT, kSharedX>(w, x, x_stride, nt, in, acc, c0 + kHead * step, step);
  warp_dot_reduce(acc);
}

__device__ __forceinline__ float silu_bf16(float g) {
  // bf16(g·sigmoid(g)) of FLINT.md swiglu; expf is accurate to ~2 ulp, far below bf16 rounding.
  return round_bf16(g / (1.0f + expf(-g)));
}

}  // namespace striker::cuda
