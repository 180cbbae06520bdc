// The BF16 skinny kernel (skinny_mma.cuh) and its launcher, shared by the dense decode GEMVs
// (gemv.cu).
#pragma once
#include "backends/cuda/linear/skinny_mma.cuh"

namespace striker::cuda {

// A lane's chunk of step s is the 8 weights s·32 + t·8 .. +7 of rows g and g + 8 (2 MMAs); U
// steps are in flight per warp, the first U requested before griddepcontrol.wait (the weights do
// not depend on earlier kernels). Tiles past `rows` compute clamped rows and store nothing.
// W0/W1: the matrices (gate, up for GateUp).
// 3 CTAs per SM (80 registers) for the 4-deep ring; 2 for the 8-deep ring; 1 for the 16-deep one.
template <int S, int U, SkinnyTile K, GemvOut M>
__global__ void __launch_bounds__(kSkinnyWarps * 32, U <= 4 ? 3 : (U <= 8 ? 2 : 1))
    skinny_bf16_kernel(const bf16_t* __restrict__ x, int in_, const bf16_t* __restrict__ W0,
                       const bf16_t* __restrict__ W1, int rows, void* out, int T) {
  pdl_launch_dependents();  // see launch.cuh
  const SkinnyTokens wk = skinny_tokens(T, (threadIdx.x & 31) >> 2);
  const SkinnyLane l = skinny_lane<S, K>(rows, (in_ + 31) / 32);
  const int t = l.t, s0 = l.s0, s1 = l.s1;
  const bf16_t* wt = W0 + int64_t(l.top) * in_ + t * 8;
  const bf16_t* wb = W1 + int64_t(l.bottom) * in_ + t * 8;
  const bf16_t* xg = x + int64_t(wk.x_row) * in_ + t * 8;
  uint4 qt[U], qb[U];
  // in % 8 == 0, so a lane's chunk is wholly inside the row or wholly past it (then zeros).
  auto load = [&](int u, int s) {
    const bool live = s < s1 && s * 32 + t * 8 < in_;
    qt[u] = live ? load_stream(wt + int64_t(s) * 32) : make_uint4(0, 0, 0, 0);
    qb[u] = live ? load_stream(wb + int64_t(s) * 32) : make_uint4(0, 0, 0, 0);
  };
#pragma unroll
  for (int u = 0; u < U; ++u) load(u, s0 + u);
  pdl_wait();  // x (and h in Residual mode) come from earlier kernels
  SkinnyAcc acc;
  for (int s = s0; s < s1; s += U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (s + u < s1) {  // warp-uniform: the MMAs run on converged warps
        const uint4 xq = (s + u) * 32 + t * 8 < in_ ? load_cached(xg + int64_t(s + u) * 32) : make_uint4(0, 0, 0, 0);
        skinny_mma(acc.c[0], qt[u].x, qb[u].x, qt[u].y, qb[u].y, xq.x, xq.y);
        skinny_mma(acc.c[1], qt[u].z, qb[u].z, qt[u].w, qb[u].w, xq.z, xq.w);
        load(u, s + u + U);  // refill the slot just consumed
      }
    }
  }
  skinny_store<S, K, M>(acc, wk.out_row0, wk.nt, rows, [](int) { return 1.f; }, out);
}

// CTAs below which a split-8 dense launch keeps 8 steps in flight per warp instead of 4 (one CTA
// per SM would otherwise hold ~32 KiB of loads: o_proj and dense down have 128 CTAs).
constexpr unsigned kSkinnyDeepRingCtas = 264;
// One wave of one CTA per SM (the H200 has 132): a split-8 launch this small whose warps have at
// most 16 steps each (o_proj: 4096 wide, 16 steps) takes the 16-deep ring, so every weight byte is
// requested before griddepcontrol.wait, as the one-token CUDA-core o_proj does (6.8 µs there against
// 12.4 µs for the 8-deep ring, which requested half; measured 8.2-8.5 µs at 2-8 tokens:
// docs/performance.md, "The MoE half of a decode layer").
constexpr unsigned kSkinnyOneWaveCtas = 132;
constexpr int kSkinnyDeepestSteps = 16;

// T tokens (2..8 in production). Shapes are checked by the callers (in % 8 == 0, 16-byte aligned rows).
template <SkinnyTile K, GemvOut M>
void launch_skinny_bf16(const bf16_t* x, int in, const bf16_t* W0, const bf16_t* W1, int rows, void* out, int T,
                        cudaStream_t stream) {
  const int steps = (in + 31) / 32, S = skinny_split(steps, 4);
  const dim3 grid = skinny_grid<K>(rows, S, T);
  const unsigned ctas = grid.x * grid.y;
  if constexpr (K == SkinnyTile::Gemv && M == GemvOut::Residual) {
    if (S == 8 && ctas <= kSkinnyOneWaveCtas && (steps + 7) / 8 <= kSkinnyDeepestSteps) {
      launch_pdl(skinny_bf16_kernel<8, kSkinnyDeepestSteps, K, M>, grid, dim3(kSkinnyWarps * 32), 0, stream, x, in,
                 W0, W1, rows, out, T);
      return;
    }
  }
  skinny_dispatch<true>(S, ctas < kSkinnyDeepRingCtas, [&](auto s, auto u) {
    launch_pdl(skinny_bf16_kernel<decltype(s)::value, decltype(u)::value, K, M>, grid, dim3(kSkinnyWarps * 32), 0,
               stream, x, in, W0, W1, rows, out, T);
  });
}

}  // namespace striker::cuda
