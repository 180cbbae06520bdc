// The inner loop every GEMV-style kernel shares: one warp computes R dot products (R weight rows,
// each against its own activation row, for up to NT tokens) with 16-byte streaming loads of the
// weights. Results are lane-partial; the caller reduces them with warp_sum.
#pragma once
#include "backends/cuda/common/device_math.cuh"

namespace striker::cuda {

// w[r]: weight row r (in bf16 values, 16-byte aligned). x[r]: activations for row r, token t at
// x[r] + t*x_stride. nt <= NT tokens are live. in % 8 == 0. With split-K, `part` of `parts`
// warps share the rows: this warp takes 16-byte chunks part*32+lane, stepping 32*parts.
// Adds one 16-byte chunk c of R weight rows (already loaded: wq) times the tokens' activations.
// kSharedX: the activations are a shared-memory row (load_x).
template <int R, int NT, bool kSharedX = false>
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

// The chunks part*32+lane+i·32·parts (i >= first) of warp_dot, from chunk `first` on.
template <int R, int NT, bool kSharedX = false>
__device__ __forceinline__ void warp_dot_from(const bf16_t* const (&w)[R], const bf16_t* const (&x)[R],
                                              int64_t x_stride, int nt, int in, float (&acc)[R][NT], int part,
                                              int parts, int first) {
  const int chunks = in / 8;
  // Single-token passes unroll deeper: more independent 16-byte loads in flight per lane.
#pragma unroll(NT == 1 ? 4 : 2)
  for (int c = part * 32 + (threadIdx.x & 31) + first * 32 * parts; c < chunks; c += 32 * parts) {
    uint4 wq[R];
#pragma unroll
    for (int r = 0; r < R; ++r) wq[r] = load_stream(w[r] + int64_t(c) * 8);
    warp_dot_chunk<R, NT, kSharedX>(wq, x, x_stride, nt, c, acc);
  }
}

// w[r]: weight row r (in bf16 values, 16-byte aligned). x[r]: activations for row r, token t at
// x[r] + t*x_stride. nt <= NT tokens are live. in % 8 == 0. With split-K, `part` of `parts`
// warps share the rows: this warp takes 16-byte chunks part*32+lane, stepping 32*parts.
template <int R, int NT, bool kSharedX = false>
__device__ __forceinline__ void warp_dot(const bf16_t* const (&w)[R], const bf16_t* const (&x)[R], int64_t x_stride,
                                         int nt, int in, float (&acc)[R][NT], int part = 0, int parts = 1) {
  warp_dot_zero<R, NT>(acc);
  warp_dot_from<R, NT, kSharedX>(w, x, x_stride, nt, in, acc, part, parts, 0);
  warp_dot_reduce<R, NT>(acc);
}

// warp_dot in two halves around griddepcontrol.wait: the weights of a lane's first kPre chunks do
// not depend on earlier kernels, so they are loaded before the wait (while the kernel in front
// drains) and the rest after it. For the decode GEMVs (QKV: 1 chunk per lane, o_proj: 2) that is
// every weight byte.
template <int R, int kPre>
struct WarpDotPrologue {
  uint4 q[kPre][R];
};

template <int R, int kPre>
__device__ __forceinline__ void warp_dot_prologue(const bf16_t* const (&w)[R], int in, WarpDotPrologue<R, kPre>& pr,
                                                  int part = 0, int parts = 1) {
  const int chunks = in / 8;
#pragma unroll
  for (int i = 0; i < kPre; ++i) {
    const int c = part * 32 + (threadIdx.x & 31) + i * 32 * parts;
    if (c < chunks)
#pragma unroll
      for (int r = 0; r < R; ++r) pr.q[i][r] = load_stream(w[r] + int64_t(c) * 8);
  }
}

template <int R, int NT, int kPre, bool kSharedX = false>
__device__ __forceinline__ void warp_dot_after_prologue(const WarpDotPrologue<R, kPre>& pr,
                                                        const bf16_t* const (&w)[R], const bf16_t* const (&x)[R],
                                                        int64_t x_stride, int nt, int in, float (&acc)[R][NT],
                                                        int part = 0, int parts = 1) {
  const int chunks = in / 8;
  warp_dot_zero<R, NT>(acc);
#pragma unroll
  for (int i = 0; i < kPre; ++i) {
    const int c = part * 32 + (threadIdx.x & 31) + i * 32 * parts;
    if (c < chunks) warp_dot_chunk<R, NT, kSharedX>(pr.q[i], x, x_stride, nt, c, acc);
  }
  warp_dot_from<R, NT, kSharedX>(w, x, x_stride, nt, in, acc, part, parts, kPre);
  warp_dot_reduce<R, NT>(acc);
}

__device__ __forceinline__ float silu_bf16(float g) {
  // bf16(g·sigmoid(g)) of FLINT.md swiglu; expf is accurate to ~2 ulp, far below bf16 rounding.
  return round_bf16(g / (1.0f + expf(-g)));
}

}  // namespace striker::cuda
