// The NVFP4 skinny kernel (skinny_mma.cuh) and its launcher, shared by the dense decode GEMVs
// (nvfp4_gemv.cu); its tile and step functions also serve the MoE's shared expert of a per-slot step
// (nvfp4_moe_shared_skinny: nvfp4_moe.cu, nvfp4_moe_mma.cu).
#pragma once
#include "backends/cuda/linear/skinny_mma.cuh"
#include "backends/cuda/nvfp4/nvfp4_bf16_bits.h"
#include "backends/cuda/nvfp4/nvfp4_decode.cuh"
#include "backends/cuda/nvfp4/nvfp4_linear.h"

namespace striker::cuda {

// A lane's chunk of step s is code chunk 4s + t of rows g and g + 8 (32 weights each, two scale
// bytes): decoded exactly into bf16 E2M1·E4M3·2^-8 (nvfp4_pair_bf16, ~2 instructions per weight) as
// 8 MMAs; 2^8 and scale2 are applied to the fp32 sum before the bf16 rounding (skinny_store). The
// weight pairs come out of the decoder as (j, j + 4) of a code word, so the activations are paired
// the same way (act_pair_bf16).

// One 128-weight step of a lane: the four code words of its chunk of rows top and bottom (scale_t /
// scale_b: the chunk's two scale bytes each), 8 MMAs per token group; x[n] = token group n's
// activations at this lane's chunk of the step. Every skinny NVFP4 tile runs these MMAs in this order.
template <int NG>
__device__ __forceinline__ void nvfp4_skinny_step(const uint4& qt, uint32_t scale_t, const uint4& qb,
                                                  uint32_t scale_b, const bf16_t* const (&x)[NG], bool live,
                                                  SkinnyAcc (&acc)[NG]) {
  uint32_t at[2], ab[2];  // the two scale groups' scales (canonical bytes: nvfp4_scales.h)
  ue4m3x2_bf16x2_x2p118_bits(scale_t, at[0], at[1]);
  ue4m3x2_bf16x2_x2p118_bits(scale_b, ab[0], ab[1]);
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // code word i: weights 8i..8i+7 of the chunk, scale group i / 2
    uint4 xq[NG];
#pragma unroll
    for (int n = 0; n < NG; ++n) xq[n] = live ? load_cached(x[n] + i * 8) : make_uint4(0, 0, 0, 0);
    uint32_t f0[4], f1[4];
    code_word_fragments(code_word(qt, i), at[i / 2], code_word(qb, i), ab[i / 2], f0, f1);
#pragma unroll
    for (int n = 0; n < NG; ++n) {
      mma_m16n8k16(acc[n].c[0], f0, act_pair_bf16(xq[n], 0), act_pair_bf16(xq[n], 1));
      mma_m16n8k16(acc[n].c[1], f1, act_pair_bf16(xq[n], 2), act_pair_bf16(xq[n], 3));
    }
  }
}

// The work of one skinny CTA (kSkinnyWarps warps): its tiles of grid column blockIdx.x for the token
// groups of CTA row y. The weights are requested before griddepcontrol.wait. Also the shared-expert
// CTAs of the per-slot MoE gate/up kernel (nvfp4_moe.cu), CTA row y for token group y.
template <int S, int U, SkinnyTile K, GemvOut M, int NG>
__device__ __forceinline__ void nvfp4_skinny_cta(const bf16_t* __restrict__ x, int in_, Nvfp4Matrix W0,
                                                 Nvfp4Matrix W1, int rows, void* out, int T, RowScale2 s2, int y) {
  static_assert(NG == 1 || NG == 2, "one or two MMA column groups of 8 tokens per CTA");
  const SkinnyLane l = skinny_lane<S, K>(rows, (in_ + 127) / 128);
  const int t = l.t, s0 = l.s0, s1 = l.s1;
  const uint8_t* ct = W0.codes + int64_t(l.top) * (in_ / 2) + t * 16;
  const uint8_t* cb = W1.codes + int64_t(l.bottom) * (in_ / 2) + t * 16;
  const uint8_t* st = W0.scales + int64_t(l.top) * (in_ / 16) + t * 2;
  const uint8_t* sb = W1.scales + int64_t(l.bottom) * (in_ / 16) + t * 2;
  const bf16_t* xg[NG];
#pragma unroll
  for (int n = 0; n < NG; ++n)
    xg[n] = x + int64_t(skinny_tokens<NG>(T, (threadIdx.x & 31) >> 2, n, y).x_row) * in_ + t * 32;
  uint4 qt[U], qb[U];
  uint32_t scale_t[U], scale_b[U];
  // in % 64 == 0: a lane's 32-weight chunk is wholly inside the row or wholly past it (then zeros).
  auto load = [&](int u, int s) {
    const bool live = s < s1 && s * 128 + t * 32 < in_;
    qt[u] = live ? load_stream(ct + int64_t(s) * 64) : make_uint4(0, 0, 0, 0);
    qb[u] = live ? load_stream(cb + int64_t(s) * 64) : make_uint4(0, 0, 0, 0);
    scale_t[u] = live ? __ldcs(reinterpret_cast<const unsigned short*>(st + int64_t(s) * 8)) : 0u;
    scale_b[u] = live ? __ldcs(reinterpret_cast<const unsigned short*>(sb + int64_t(s) * 8)) : 0u;
  };
#pragma unroll
  for (int u = 0; u < U; ++u) load(u, s0 + u);
  pdl_wait();  // x (and h in Residual mode) come from earlier kernels
  SkinnyAcc acc[NG];
  for (int s = s0; s < s1; s += U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (s + u < s1) {  // warp-uniform: the MMAs run on converged warps
        const bool live = (s + u) * 128 + t * 32 < in_;
        const bf16_t* xs[NG];
#pragma unroll
        for (int n = 0; n < NG; ++n) xs[n] = xg[n] + int64_t(s + u) * 128;
        nvfp4_skinny_step<NG>(qt[u], scale_t[u], qb[u], scale_b[u], xs, live, acc);
        load(u, s + u + U);  // refill the slot just consumed
      }
    }
  }
  auto scale = [&](int o) { return s2.at(o) * kNvfp4PairUnscale; };
#pragma unroll
  for (int n = 0; n < NG; ++n) {
    if (n > 0) __syncthreads();  // skinny_store's reduction buffer is reused
    const SkinnyTokens wk = skinny_tokens<NG>(T, (threadIdx.x & 31) >> 2, n, y);
    skinny_store<S, K, M>(acc[n], wk.out_row0, wk.nt, rows, scale, out);
  }
}

// W0/W1: the matrices (gate, up for GateUp); s2: the matrix's scale2 by output row (Gemv), or
// gate's scale2 at 0 and up's at 1 (GateUp).
// NG groups of 8 tokens per CTA: every decoded weight fragment feeds NG MMAs, one per group; an MMA
// column does not depend on the others, so each group's bits are those of a CTA of its own.
template <int S, int U, SkinnyTile K, GemvOut M, int NG>
__global__ void __launch_bounds__(kSkinnyWarps * 32, 2)
    nvfp4_skinny_kernel(const bf16_t* __restrict__ x, int in_, Nvfp4Matrix W0, Nvfp4Matrix W1, int rows, void* out,
                        int T, RowScale2 s2) {
  pdl_launch_dependents();  // see launch.cuh
  nvfp4_skinny_cta<S, U, K, M, NG>(x, in_, W0, W1, rows, out, T, s2, int(blockIdx.y));
}

// T tokens (2..64 in production: ops_linear.cpp), in one or two groups of 8 per CTA
// (kNvfp4SkinnyTwoGroupsMinTokens, nvfp4_linear.h). Shapes are checked by the callers (in % 64 == 0,
// 16-byte aligned codes, 4-byte aligned scales).
template <SkinnyTile K, GemvOut M>
void launch_nvfp4_skinny(const bf16_t* x, int in, Nvfp4Matrix W0, Nvfp4Matrix W1, int rows, void* out, int T,
                         RowScale2 s2, cudaStream_t stream) {
  // >= 4 steps per warp: Flint's QKV (16 steps per row) takes 160 CTAs of 2 tiles, every weight
  // requested before the wait in one wave, rather than 320 CTAs of 2 steps (1.2 waves at 2 per SM).
  const int S = skinny_split((in + 127) / 128, 4);
  const bool wide = T > kSkinnyTokens && int(skinny_grid<K>(rows, S, T).x) >= kNvfp4SkinnyWideGridMinCtas;
  const bool two = T >= kNvfp4SkinnyTwoGroupsMinTokens || wide;
  skinny_dispatch<false>(S, false, [&](auto s, auto u) {
    constexpr int kS = decltype(s)::value, kU = decltype(u)::value;
    if (two) {
      launch_pdl(nvfp4_skinny_kernel<kS, kU, K, M, 2>, skinny_grid<K>(rows, S, T, 2), dim3(kSkinnyWarps * 32), 0,
                 stream, x, in, W0, W1, rows, out, T, s2);
    } else {
      launch_pdl(nvfp4_skinny_kernel<kS, kU, K, M, 1>, skinny_grid<K>(rows, S, T), dim3(kSkinnyWarps * 32), 0,
                 stream, x, in, W0, W1, rows, out, T, s2);
    }
  });
}

}  // namespace striker::cuda
