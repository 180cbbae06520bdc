// warp_dot.cuh's one-token dot products with the sums on tensor cores: the same lanes load the same
// 16-byte weight chunks (and the same prologue chunks before griddepcontrol.wait), but the products
// and sums go through mma.sync m16n8k16 in the "diagonal" arrangement (mma_diagonal_row_sums,
// tensor_core.cuh): a bf16 weight chunk is already an A fragment and the lane's 8 activations its B
// fragment, so a chunk of two rows costs 2 MMAs instead of 16 fmaf and 16 unpacks. fp32 accumulation
// (FLINT.md §4); the sum's order differs from warp_dot's fmaf chain. Every row of the warp takes the
// same activations x (R even: rows 2p and 2p + 1 share an MMA). The loops are warp-uniform (mma.sync
// needs every lane): a lane past the row's last chunk multiplies zeros.
#pragma once
#include "backends/cuda/common/tensor_core.cuh"
#include "backends/cuda/common/warp_dot.cuh"

namespace striker::cuda {

template <int R, bool kSharedX = false>
__device__ __forceinline__ void warp_dot_chunk_mma(const uint4 (&wq)[R], const bf16_t* x, bool live, int c,
                                                   float (&d)[R / 2][2][4]) {
  static_assert(R % 2 == 0, "rows go to the MMA in pairs");
  const uint4 xq = live ? load_x<kSharedX>(x + int64_t(c) * 8) : make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int p = 0; p < R / 2; ++p) {
    const uint32_t a0[4] = {wq[2 * p].x, wq[2 * p + 1].x, wq[2 * p].y, wq[2 * p + 1].y};  // weights 0-3
    mma_m16n8k16(d[p][0], a0, xq.x, xq.y);
    const uint32_t a1[4] = {wq[2 * p].z, wq[2 * p + 1].z, wq[2 * p].w, wq[2 * p + 1].w};  // weights 4-7
    mma_m16n8k16(d[p][1], a1, xq.z, xq.w);
  }
}

// warp_dot_prologue's loads, zeros for a lane past the row.
template <int R, int kPre>
__device__ __forceinline__ void warp_dot_prologue_mma(const bf16_t* const (&w)[R], int in,
                                                      WarpDotPrologue<R, kPre>& pr, int part = 0, int parts = 1) {
  const int chunks = in / 8;
#pragma unroll
  for (int i = 0; i < kPre; ++i) {
    const int c = part * 32 + (threadIdx.x & 31) + i * 32 * parts;
#pragma unroll
    for (int r = 0; r < R; ++r) pr.q[i][r] = c < chunks ? load_stream(w[r] + int64_t(c) * 8) : make_uint4(0, 0, 0, 0);
  }
}

// Σ_i x_i·w[r]_i of R rows in every lane: the prologue's kPre chunks per lane (kPre = 0: none), then
// the rest, 4 chunk rounds unrolled.
// pre: the prologue's chunks (WarpDotPrologue::q), nullptr when kPre = 0.
template <int R, int kPre, bool kSharedX = false>
__device__ __forceinline__ void warp_dot_mma(const uint4 (*pre)[R], const bf16_t* const (&w)[R],
                                             const bf16_t* x, int in, float (&acc)[R][1], int part = 0,
                                             int parts = 1) {
  const int chunks = in / 8, step = 32 * parts, lane = threadIdx.x & 31;
  float d[R / 2][2][4];
  mma_diagonal_zero<R>(d);
  if constexpr (kPre > 0) {
#pragma unroll
    for (int i = 0; i < kPre; ++i) {
      const int b = part * 32 + i * step;
      if (b < chunks) warp_dot_chunk_mma<R, kSharedX>(pre[i], x, b + lane < chunks, b + lane, d);
    }
  }
#pragma unroll 4
  for (int b = part * 32 + kPre * step; b < chunks; b += step) {  // warp-uniform; lane's chunk c = b + lane
    const int c = b + lane;
    const bool live = c < chunks;
    uint4 wq[R];
#pragma unroll
    for (int r = 0; r < R; ++r) wq[r] = live ? load_stream(w[r] + int64_t(c) * 8) : make_uint4(0, 0, 0, 0);
    warp_dot_chunk_mma<R, kSharedX>(wq, x, live, c, d);
  }
  mma_diagonal_row_sums<R>(d, 1.f, acc);
}

}  // namespace striker::cuda
