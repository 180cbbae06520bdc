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
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include "backends/cuda/common/cuda_check.h"
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

__device__ __forceinline__ SkinnyTokens skinny_tokens(int T, int g) {
  SkinnyTokens w;
  const int t0 = blockIdx.y * kSkinnyTokens;
  w.nt = min(kSkinnyTokens, T - t0);
  w.out_row0 = t0;
  w.x_row = t0 + min(g, w.nt - 1);
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

// The activations of a CTA's tokens staged in shared memory right after griddepcontrol.wait: one
// L2 round trip for the whole reduction, where loading each step's 16 bytes inside the step loop
// put one dependent L2 round trip per chunk step after the wait (8 for QKV, 16 for o_proj per
// warp at BF16; the loop's per-step branches keep ptxas from hoisting them). A lane of step s
// reads kV 16-byte vectors (BF16 kV = 1: elements s·32 + t·8 .. +7; NVFP4 kV = 4: s·128 + t·32
// + 8v .. +7) of token g; vector (s, v, g, t) sits at ((s·kV + v)·8 + g)·4 + t, so each of a
// warp's LDS.128 reads 512 contiguous bytes. Only the nt live tokens are copied (lanes of groups
// g >= nt read token nt - 1, as skinny_tokens' x_row); vectors past `in` are zero-filled, so a
// zero weight never meets a stale NaN.
// Pulls the 32-byte sector at p into L2 (no registers, nothing waits for it): a warp's chunk steps
// past its register ring are requested this way before griddepcontrol.wait, so that their loads
// after the wait hit L2 instead of starting an HBM round trip then.
__device__ __forceinline__ void skinny_prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Chunk steps past the ring prefetched per warp (skinny_prefetch_l2); the temporary A/B switch
// STRIKER_AB_OFF=1, =stage or =pf turns it off.
inline int skinny_prefetch_steps() {
  static const char* ab = std::getenv("STRIKER_AB_OFF");
  static const bool off = ab != nullptr && (std::strcmp(ab, "1") == 0 || std::strcmp(ab, "stage") == 0 ||
                                            std::strcmp(ab, "pf") == 0);
  return off ? 0 : 16;
}

inline size_t skinny_stage_bytes(int steps, int kV) { return size_t(steps) * 4 * kV * kSkinnyTokens * 16; }

template <int kV>
__device__ __forceinline__ void skinny_stage_x(const bf16_t* __restrict__ x, int in_, int steps, int T,
                                               uint4* __restrict__ xs) {
  const int t0 = blockIdx.y * kSkinnyTokens, nt = min(kSkinnyTokens, T - t0);
  const int row_vecs = steps * 4 * kV;  // vectors per token row, past `in` included
  for (int i = threadIdx.x; i < nt * row_vecs; i += kSkinnyWarps * 32) {
    const int g = i / row_vecs, q = i - g * row_vecs;  // q = (s·4 + t)·kV + v: element 8q of the row
    const int s = q / (4 * kV), t = (q / kV) & 3, v = q % kV;
    const bool live = q * 8 < in_;
    cp_async16(reinterpret_cast<bf16_t*>(xs + ((s * kV + v) * kSkinnyTokens + g) * 4 + t),
               x + int64_t(t0 + g) * in_ + (live ? q * 8 : 0), live);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
}

// Vector v of step s for lane (g, t) of a staged tile (g clamped to the live tokens).
template <int kV>
__device__ __forceinline__ uint4 skinny_x_at(const uint4* __restrict__ xs, int s, int v, int g, int t) {
  return xs[((s * kV + v) * kSkinnyTokens + g) * 4 + t];
}

// Largest staged tile (bytes of dynamic shared memory): Flint's widest decode reduction, the dense
// down projection (8192 wide: 128 KiB for 8 tokens, BF16 or NVFP4), fits one CTA per SM beside the
// 4 KiB reduction space; wider reductions keep the per-step loads.
constexpr int kSkinnyMaxStageBytes = 160 * 1024;

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

// The residual h values a CTA's epilogue adds to (GemvOut::Residual), loaded right after
// griddepcontrol.wait so that the epilogue does not start with an L2 round trip of its own: thread
// i holds element j·256 + i of skinny_store's output loop (kPer per thread). Other modes: empty.
template <int S, SkinnyTile K, GemvOut M>
struct SkinnyResidual {
  static constexpr int kTotal = (kSkinnyWarps / S) * SkinnyRows<K>::kOut * kSkinnyTokens;
  static constexpr int kPer = M == GemvOut::Residual ? (kTotal + kSkinnyWarps * 32 - 1) / (kSkinnyWarps * 32) : 0;
  float h[kPer > 0 ? kPer : 1];

  // Output index of skinny_store's element i, or -1 where it stores nothing.
  __device__ static int64_t index(int i, int row0, int nt, int rows) {
    constexpr int kOut = SkinnyRows<K>::kOut;
    const int tile = i / (kOut * kSkinnyTokens), j = i % (kOut * kSkinnyTokens);
    const int tok = j / kOut, r = j % kOut;
    const int o = (blockIdx.x * (kSkinnyWarps / S) + tile) * kOut + r;
    return tok >= nt || o >= rows ? -1 : int64_t(row0 + tok) * rows + o;
  }
  __device__ void load(int row0, int nt, int rows, const void* out) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int i = int(threadIdx.x) + k * kSkinnyWarps * 32;
      const int64_t idx = i < kTotal ? index(i, row0, nt, rows) : -1;
      h[k] = idx >= 0 ? __bfloat162float(static_cast<const bf16_t*>(out)[idx]) : 0.f;
    }
  }
};

// The CTA's epilogue: every warp's partial tile to shared memory, then the S parts of each
// output summed in part order and written (Gemv: store_gemv_out of bf16(scale·sum); GateUp:
// act = bf16(bf16(g·sigmoid(g))·u), g and u rounded first). rows = the matrix's output rows
// (Gemv) or inter (GateUp); scale(o) = the row's scale2 (1 for BF16).
// `res`: the residual values (Residual mode), loaded by SkinnyResidual::load when kEarlyH (else
// read here).
template <int S, SkinnyTile K, GemvOut M, bool kEarlyH, typename Scale>
__device__ __forceinline__ void skinny_store(const SkinnyAcc& acc, int row0, int nt, int rows, Scale scale,
                                             void* out, const SkinnyResidual<S, K, M>& res) {
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
#pragma unroll
  for (int k = 0; k < (kTiles * kOut * kSkinnyTokens + kSkinnyWarps * 32 - 1) / (kSkinnyWarps * 32); ++k) {
    const int i = int(threadIdx.x) + k * kSkinnyWarps * 32;
    if (i >= kTiles * kOut * kSkinnyTokens) break;
    const int tile = i / (kOut * kSkinnyTokens), j = i % (kOut * kSkinnyTokens);
    const int tok = j / kOut, r = j % kOut;  // consecutive threads: consecutive rows of one token
    const int o = (tile0 + tile) * kOut + r;
    if (tok >= nt || o >= rows) continue;
    const int64_t idx = int64_t(row0 + tok) * rows + o;
    if constexpr (K == SkinnyTile::Gemv && M == GemvOut::Residual && kEarlyH) {
      // store_gemv_out<Residual>'s h = bf16(h + y), h read after the wait
      static_cast<bf16_t*>(out)[idx] = __float2bfloat16_rn(res.h[k] + round_bf16(sum(tile, r, tok) * scale(o)));
    } else if constexpr (K == SkinnyTile::Gemv) {
      store_gemv_out<M>(out, idx, round_bf16(sum(tile, r, tok) * scale(o)));
    } else {
      const float gv = round_bf16(sum(tile, r, tok) * scale(0));
      const float uv = round_bf16(sum(tile, r + 8, tok) * scale(1));
      static_cast<bf16_t*>(out)[idx] = __float2bfloat16_rn(silu_bf16(gv) * uv);
    }
  }
}

inline int skinny_token_groups(int T) { return (T + kSkinnyTokens - 1) / kSkinnyTokens; }

// Grid of a skinny launch over `rows` output rows: x over CTAs of (8 / S) tiles, y over groups of
// 8 of the T tokens.
template <SkinnyTile K>
dim3 skinny_grid(int rows, int S, int T) {
  const int tiles = (rows + SkinnyRows<K>::kOut - 1) / SkinnyRows<K>::kOut, per_cta = kSkinnyWarps / S;
  return dim3(unsigned((tiles + per_cta - 1) / per_cta), unsigned(skinny_token_groups(T)));
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

// Whether a skinny launch of `steps` chunk steps per row stages its activations (skinny_stage_x):
// every Flint shape does; the temporary A/B switch STRIKER_AB_OFF=1 or =stage keeps the per-step loads.
inline bool skinny_stage_for(int steps, int kV) {
  static const char* ab = std::getenv("STRIKER_AB_OFF");
  static const bool off = ab != nullptr && (std::strcmp(ab, "1") == 0 || std::strcmp(ab, "stage") == 0);
  return !off && skinny_stage_bytes(steps, kV) <= size_t(kSkinnyMaxStageBytes);
}

// Launches kKernel with `smem` bytes of dynamic shared memory. A staged kernel is configured once
// per instantiation (a thread-safe static; function attributes are allowed during graph capture):
// up to kSkinnyMaxStageBytes of dynamic shared memory, and the largest carveout so that 2–3 CTAs of
// 32–64 KiB share an SM.
template <auto kKernel, typename... Args>
void launch_skinny(dim3 grid, size_t smem, cudaStream_t stream, Args&&... args) {
  if (smem > 0) {
    static const bool configured = [] {
      STRIKER_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSkinnyMaxStageBytes));
      STRIKER_CUDA_CHECK(
          cudaFuncSetAttribute(kKernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
      return true;
    }();
    (void)configured;
  }
  launch_pdl(kKernel, grid, dim3(kSkinnyWarps * 32), smem, stream, std::forward<Args>(args)...);
}

}  // namespace striker::cuda
