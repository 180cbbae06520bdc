// Decode GEMMs of 2..8 tokens on tensor cores ("skinny GEMM"), shared by the BF16 (gemv.cu) and
// NVFP4 (nvfp4_gemv.cu) launchers. The weights are the M side of mma.sync m16n8k16 (16 weight rows
// per warp), the <= 8 tokens its N side, fp32 accumulators (FLINT.md §4: mm in fp32).
//
// No shared-memory staging: a lane (group g = lane/4, t = lane%4) loads 16 contiguous bytes of
// weight rows g and g+8 and the same k range of token g's activations straight into registers.
// A dot product does not depend on which k goes to which MMA slot, so a chunk's values fill the
// fragment slots in load order and the activations fill the B fragment in the same order:
//   BF16: one 16-byte chunk (8 weights per row) = 2 MMAs (k16 = 4 lanes x 4 values).
//   NVFP4: one 16-byte code chunk (32 weights per row) = 8 MMAs, each E2M1·E4M3 decoded exactly
//   into bf16 (at most 5 significant bits, nvfp4_gemv.cu) and scale2 applied after the sum.
// A warp takes one 16-row tile over 1/S of the reduction (split-K over the S warps of a row
// tile); the partial tiles are summed in shared memory in a fixed order, so results do not depend
// on timing. Each warp keeps U chunk steps in flight in a register ring, and the first U steps are
// requested before griddepcontrol.wait (weights only), streamed while the kernel in front drains.
#pragma once
#include <cstdint>
#include <type_traits>

#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/tensor_core.cuh"
#include "backends/cuda/common/warp_dot.cuh"
#include "backends/cuda/linear/gemv_out.cuh"

namespace striker::cuda {

constexpr int kSkinnyWarps = 8;   // warps per CTA
constexpr int kSkinnyTokens = 8;  // the MMA's N: tokens per pass (grid.y covers more)

// Where a 16-row tile's rows come from and how its sums are written.
//   Gemv: rows o0..o0+15 of one matrix (W0 == W1), one output per row (GemvOut M).
//   GateUp: rows o0..o0+7 of Wg (top half) and of Wu (bottom half): 8 SwiGLU outputs.
enum class SkinnyTile { Gemv, GateUp };

template <SkinnyTile K>
struct SkinnyRows {
  static constexpr int kOut = K == SkinnyTile::Gemv ? 16 : 8;  // outputs per tile
  // Weight rows of lane group g: the top (MMA row g) and the bottom (row g + 8).
  __device__ static int top(int o0, int g) { return o0 + g; }
  __device__ static int bottom(int o0, int g) { return K == SkinnyTile::Gemv ? o0 + 8 + g : o0 + g; }
};

// The tokens one CTA works on: grid.y covers groups of 8 of the launch's T tokens.
struct SkinnyTokens {
  int nt;        // live tokens, <= 8
  int out_row0;  // output row of token 0 (a CTA's tokens write consecutive rows)
  int x_row;     // activation row of this lane group's token (groups past nt repeat the last)
};

// Token group n of the NG groups of 8 that CTA row y takes (grid.y over groups of 8·NG). A group
// past T (the last CTA's second group, T % 16 <= 8) has nt = 0 and repeats the step's last token:
// computed, never stored.
template <int NG = 1>
__device__ __forceinline__ SkinnyTokens skinny_tokens(int T, int g, int n = 0, int y = int(blockIdx.y)) {
  SkinnyTokens w;
  const int t0 = (y * NG + n) * kSkinnyTokens;
  w.nt = NG == 1 ? min(kSkinnyTokens, T - t0) : max(0, min(kSkinnyTokens, T - t0));
  w.out_row0 = t0;
  w.x_row = w.nt > 0 ? t0 + min(g, w.nt - 1) : T - 1;
  return w;
}

// Where one lane of a skinny CTA works: lane group g / thread t of the MMA, the matrix rows of
// its MMA rows g and g + 8 (clamped: rows past the matrix are computed, never stored) and its
// warp's chunk steps [s0, s1) of `steps` (split-K over S warps per tile).
struct SkinnyLane {
  int g, t, s0, s1, top, bottom;
};

template <int S, SkinnyTile K>
__device__ __forceinline__ SkinnyLane skinny_lane(int rows, int steps) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  SkinnyLane l;
  l.g = lane >> 2, l.t = lane & 3;
  const int o0 = (blockIdx.x * (kSkinnyWarps / S) + warp / S) * SkinnyRows<K>::kOut, per = (steps + S - 1) / S;
  l.s0 = (warp % S) * per;
  l.s1 = min(steps, l.s0 + per);
  l.top = min(SkinnyRows<K>::top(o0, l.g), rows - 1);
  l.bottom = min(SkinnyRows<K>::bottom(o0, l.g), rows - 1);
  return l;
}

// One warp's accumulators: two chains (even and odd MMA of a step) so consecutive MMAs do not wait
// on each other; c[j][0..1] = (row g, tokens 2t, 2t+1), c[j][2..3] = (row g + 8, same tokens).
struct SkinnyAcc {
  float c[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
};

// d += W·x over one 16-wide k slice: a_top/a_bottom hold two bf16x2 words of rows g / g+8
// (slots 2t..2t+1 and 2t+8..2t+9), x0/x1 the activations of the same slots for token g.
__device__ __forceinline__ void skinny_mma(float (&d)[4], uint32_t top0, uint32_t bottom0, uint32_t top1,
                                           uint32_t bottom1, uint32_t x0, uint32_t x1) {
  const uint32_t a[4] = {top0, bottom0, top1, bottom1};
  mma_m16n8k16(d, a, x0, x1);
}

// The CTA's epilogue: every warp's partial tile to shared memory, then the S parts of each
// output summed in part order and written (Gemv: store_gemv_out of bf16(scale·sum); GateUp:
// act = bf16(bf16(g·sigmoid(g))·u), g and u rounded first). rows = the matrix's output rows
// (Gemv) or inter (GateUp); scale(o) = the row's scale2 (1 for BF16).
template <int S, SkinnyTile K, GemvOut M, typename Scale>
__device__ __forceinline__ void skinny_store(const SkinnyAcc& acc, int row0, int nt, int rows, Scale scale,
                                             void* out) {
  constexpr int kTiles = kSkinnyWarps / S;
  const int tile0 = blockIdx.x * kTiles;
  constexpr int kOut = SkinnyRows<K>::kOut;
  __shared__ float red[kSkinnyWarps][16 * kSkinnyTokens];  // [warp][row * 8 + token]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  red[warp][g * 8 + 2 * t] = acc.c[0][0] + acc.c[1][0];
  red[warp][g * 8 + 2 * t + 1] = acc.c[0][1] + acc.c[1][1];
  red[warp][(g + 8) * 8 + 2 * t] = acc.c[0][2] + acc.c[1][2];
  red[warp][(g + 8) * 8 + 2 * t + 1] = acc.c[0][3] + acc.c[1][3];
  __syncthreads();
  auto sum = [&](int tile, int r, int tok) {
    float v = 0.f;
#pragma unroll
    for (int p = 0; p < S; ++p) v += red[tile * S + p][r * 8 + tok];
    return v;
  };
  for (int i = threadIdx.x; i < kTiles * kOut * kSkinnyTokens; i += kSkinnyWarps * 32) {
    const int tile = i / (kOut * kSkinnyTokens), j = i % (kOut * kSkinnyTokens);
    const int tok = j / kOut, r = j % kOut;  // consecutive threads: consecutive rows of one token
    const int o = (tile0 + tile) * kOut + r;
    if (tok >= nt || o >= rows) continue;
    const int64_t idx = int64_t(row0 + tok) * rows + o;
    if constexpr (K == SkinnyTile::Gemv) {
      store_gemv_out<M>(out, idx, round_bf16(sum(tile, r, tok) * scale(o)));
    } else {
      const float gv = round_bf16(sum(tile, r, tok) * scale(0));
      const float uv = round_bf16(sum(tile, r + 8, tok) * scale(1));
      static_cast<bf16_t*>(out)[idx] = __float2bfloat16_rn(silu_bf16(gv) * uv);
    }
  }
}

// Grid of a skinny launch over `rows` output rows: x over CTAs of (8 / S) tiles, y over groups of
// 8·NG of the T tokens (NG MMA column groups of 8 per CTA).
template <SkinnyTile K>
dim3 skinny_grid(int rows, int S, int T, int NG = 1) {
  const int tiles = (rows + SkinnyRows<K>::kOut - 1) / SkinnyRows<K>::kOut, per_cta = kSkinnyWarps / S;
  const int per_y = kSkinnyTokens * NG;
  return dim3(unsigned((tiles + per_cta - 1) / per_cta), unsigned((T + per_y - 1) / per_y));
}

// Calls launch(S, U) with the split S (1, 2, 4 or 8) and the ring depth U (8 when kAllowDeep,
// `deep` and S == 8; else 4) as std::integral_constant values, so each picks its kernel instance.
template <bool kAllowDeep, typename Launch>
void skinny_dispatch(int S, bool deep, Launch launch) {
  using U4 = std::integral_constant<int, 4>;
  if (S == 1) launch(std::integral_constant<int, 1>{}, U4{});
  else if (S == 2) launch(std::integral_constant<int, 2>{}, U4{});
  else if (S == 4) launch(std::integral_constant<int, 4>{}, U4{});
  else if (kAllowDeep && deep) launch(std::integral_constant<int, 8>{}, std::integral_constant<int, kAllowDeep ? 8 : 4>{});
  else launch(std::integral_constant<int, 8>{}, U4{});
}

// Split-K factor for a reduction of `steps` chunk steps per row: as many warps per tile as keep
// at least `min_steps` steps each (so each warp's ring still fills), at most 8.
inline int skinny_split(int steps, int min_steps) {
  int s = 8;
  while (s > 1 && steps < s * min_steps) s /= 2;
  return s;
}

}  // namespace striker::cuda
