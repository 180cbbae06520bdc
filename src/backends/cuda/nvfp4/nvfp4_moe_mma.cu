// The NVFP4 MoE down projection of 1-8 decode tokens (inter and the shared inter <= 512, Flint's) on
// tensor cores: each weight decoded straight into a bf16 E2M1·E4M3·2^-8 (nvfp4_pair_bf16) and summed
// by mma.sync m16n8k16 in fp32 (FLINT.md §4), ~2 instructions per weight instead of ~4.9 for the
// CUDA-core decode (docs/performance.md, sixteenth session).
//
// Fragment use (skinny_mma.cuh): a warp computes 16 output rows of one slot; lane (g = lane/4, t =
// lane%4) loads the 16-byte code chunk t of each 128-weight step of rows g (MMA row g) and g + 8, and
// the same 32 activations; a chunk's weights fill the A fragment in load order and the activations
// the B fragment in the same order (every column holds the slot's token; column 0 is read). The scale
// is inside each weight, so an MMA's 16 k values may span scale groups. The one-token kernel and the
// slot kernel run this same warp computation, so a T-token step gives each token a one-token step's bits.
#include <algorithm>
#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/stamps.cuh"
#include "backends/cuda/common/tensor_core.cuh"
#include "backends/cuda/nvfp4/nvfp4_bf16_bits.h"
#include "backends/cuda/nvfp4/nvfp4_decode.cuh"
#include "backends/cuda/nvfp4/nvfp4_moe.h"
#include "backends/cuda/nvfp4/nvfp4_moe_mma.h"
#include "backends/cuda/nvfp4/nvfp4_skinny.cuh"

namespace striker::cuda {
namespace {

constexpr int kSteps = 4;          // 128-weight steps a warp loads in one batch
constexpr int kMaxTopK = 8;
constexpr size_t kMaxDownSmem = 200 * 1024;  // the one-token launch's reservation (nvfp4_moe.cu)

// A warp's share of one dot product of rows (top, bottom) over `in` weights: steps s0, s0 + 1, ...
// below s1, all loaded in one batch (kSteps at most; the callers' shapes keep it so).
struct MmaRows {
  uint4 qt[kSteps], qb[kSteps];
  uint32_t st[kSteps], sb[kSteps];
};

// in % 64 == 0: a lane's 32-weight chunk of a step is wholly inside the row or wholly past it (the
// last step of in % 128 == 64), and then its weights, scales and activations are zeros.
// kFull: in == kFullIn (Flint's inter), so s0 = 0, s1 = kSteps and every chunk is live: the same loads
// and MMAs without the predicates and zero fills.
constexpr int kFullIn = 128 * kSteps;
template <bool kFull = false>
__device__ __forceinline__ void load_rows(const uint8_t* ct, const uint8_t* stp, const uint8_t* cb, const uint8_t* sbp,
                                          int in, int t, int s0, int s1, MmaRows& r) {
#pragma unroll
  for (int u = 0; u < kSteps; ++u)
    if (kFull || s0 + u < s1) {
      const int64_t s = kFull ? u : s0 + u;
      const bool live = kFull || s * 128 + t * 32 < in;
      r.qt[u] = live ? load_stream(ct + s * 64 + t * 16) : make_uint4(0, 0, 0, 0);
      r.qb[u] = live ? load_stream(cb + s * 64 + t * 16) : make_uint4(0, 0, 0, 0);
      r.st[u] = live ? __ldcs(reinterpret_cast<const unsigned short*>(stp + s * 8 + t * 2)) : 0u;
      r.sb[u] = live ? __ldcs(reinterpret_cast<const unsigned short*>(sbp + s * 8 + t * 2)) : 0u;
    }
}

template <bool kFull = false>
__device__ __forceinline__ void dot_rows(const MmaRows& r, const bf16_t* x, int in, int t, int s0, int s1,
                                         float (&c0)[4], float (&c1)[4]) {
  if constexpr (kFull) s0 = 0, s1 = kSteps;
  uint4 xq[kSteps][4];
#pragma unroll
  for (int u = 0; u < kSteps; ++u)
    if (s0 + u < s1) {
      const bool live = kFull || (s0 + u) * 128 + t * 32 < in;
#pragma unroll
      for (int i = 0; i < 4; ++i)
        xq[u][i] = live ? load_cached(x + int64_t(s0 + u) * 128 + t * 32 + i * 8) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
  for (int u = 0; u < kSteps; ++u)
    if (s0 + u < s1) mma_chunk_pair(r.qt[u], r.st[u], r.qb[u], r.sb[u], xq[u], c0, c1);
}

// grid (hidden / 16, T): one CTA per 16 output rows of one token, one warp per routed expert k < K
// (warp K: the fused shared expert), each over the whole inter of its expert (⌈inter / 128⌉ <= kSteps
// steps, all loaded in one batch). Then y = bf16(Σ_k w_k·bf16(scale2_e·sum_k)) in k order, plus the
// shared expert's bf16 output, added to h (the rounding points of moe.h's combine: the slot kernel
// below + moe_combine_sorted give the same bits). One token, or T without a scratch buffer.
// kFull: nvfp4_down_full(inter, shared inter) — every expert's inter is kFullIn.
template <bool kFull>
__global__ void __launch_bounds__((kMaxTopK + 1) * 32)
    nvfp4_moe_down_mma_kernel(const bf16_t* __restrict__ act, int K, Nvfp4Stack wd, int inter, int hidden,
                              const int32_t* __restrict__ ids, const float* __restrict__ topk_w, Nvfp4Shared sh,
                              const bf16_t* __restrict__ shared_act, const bf16_t* __restrict__ y_shared,
                              bf16_t* __restrict__ h) {
  STRIKER_STAMPS_CTA(kNvfp4MoeDown);
  pdl_launch_dependents();  // see launch.cuh
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int tok = blockIdx.y;
  const int o0 = blockIdx.x * 16;
  const bool fused = shared_act != nullptr;
  const bool shared = warp == K;  // only launched when fused
  const int in = shared ? sh.inter : inter;
  const int steps = (in + 127) / 128;
  const int top = min(o0 + g, hidden - 1), bottom = min(o0 + 8 + g, hidden - 1);
  MmaRows r;
  const int64_t cb = in / 2, sbytes = in / 16;
  if (shared)
    load_rows<kFull>(sh.down.codes + top * cb, sh.down.scales + top * sbytes, sh.down.codes + bottom * cb,
                     sh.down.scales + bottom * sbytes, in, t, 0, steps, r);
  pdl_wait();  // ids, weights of the routing, act and h come from earlier kernels
  STRIKER_STAMP(1);
  // The tail's loads now, so their L2 round trips overlap the dot products (seventeenth session, with
  // the one-token GEMVs' residual: −0.02 ms per step): h at the 16 outputs, each routed warp's scale2
  // and routing weight (into shared memory before the barrier).
  float hv = 0.f, s2e = 0.f, twk = 0.f;
  if (threadIdx.x < 16 && o0 + int(threadIdx.x) < hidden) hv = __bfloat162float(h[int64_t(tok) * hidden + o0 + threadIdx.x]);
  const bf16_t* xa;
  if (!shared) {
    const int64_t e = ids[tok * K + warp];
    if (lane == 0) {
      s2e = wd.scale2[e] * kNvfp4PairUnscale;
      twk = topk_w[tok * K + warp];
    }
    const uint8_t* c = wd.m.codes + e * hidden * cb;
    const uint8_t* s = wd.m.scales + e * hidden * sbytes;
    load_rows<kFull>(c + top * cb, s + top * sbytes, c + bottom * cb, s + bottom * sbytes, in, t, 0, steps, r);
    xa = act + int64_t(tok * K + warp) * inter;
  } else {
    xa = shared_act + int64_t(tok) * sh.inter;
  }
  float c0[4] = {0.f, 0.f, 0.f, 0.f}, c1[4] = {0.f, 0.f, 0.f, 0.f};
  dot_rows<kFull>(r, xa, in, t, 0, steps, c0, c1);
  __shared__ float red[kMaxTopK + 1][16];
  __shared__ float coef[2][kMaxTopK];  // each routed expert's scale2·2^8 and routing weight
  if (t == 0) {
    red[warp][g] = c0[0] + c1[0];
    red[warp][g + 8] = c0[2] + c1[2];
  }
  if (!shared && lane == 0) coef[0][warp] = s2e, coef[1][warp] = twk;
  __syncthreads();
  STRIKER_STAMP(2);
  if (threadIdx.x < 16) {
    const int o = o0 + threadIdx.x;
    if (o < hidden) {
      float sum = 0.f;
      for (int k = 0; k < K; ++k)  // Σ_k w_k·bf16(mm(act_k, Wd_e))
        sum = fmaf(coef[1][k], round_bf16(red[k][threadIdx.x] * coef[0][k]), sum);
      float y = round_bf16(sum);
      if (fused) y = round_bf16(y + round_bf16(red[K][threadIdx.x] * (sh.s2_down * kNvfp4PairUnscale)));
      else if (y_shared != nullptr) y = round_bf16(y + __bfloat162float(y_shared[int64_t(tok) * hidden + o]));
      h[int64_t(tok) * hidden + o] = __float2bfloat16_rn(hv + y);
    }
  }
}

// grid (hidden / 64, T·K [+ T, or + groups]): 4 warps of 16 rows of one slot each, the one-token
// kernel's warp computation; y[s] = bf16(scale2_e·sum) for routed slot s, and for the shared expert's
// slots T·K + t bf16(s2_down·sum) — the values that kernel rounds before its combine. With
// shared_groups > 0 (nvfp4_moe_shared_skinny), the first shared_groups grid rows are the shared expert
// of tokens 8j..8j+7 (row j): each warp a 16-row skinny Gemv tile over the whole inter (the dense
// skinny GEMV's MMAs in its order, split 1: its bits), so the shared rows are decoded once per 8 tokens;
// the routed slots take the rows after them, in order.
constexpr int kSlotWarps = 4;

// Every expert's inter (the routed one and, when fused, the shared one) is kFullIn: the kernels' kFull form.
bool nvfp4_down_full(int inter, bool fused, int shared_inter) {
  return inter == kFullIn && (!fused || shared_inter == kFullIn);
}

template <bool kFull>
__device__ __forceinline__ void shared_down_token_group(const MmaRows& r, const bf16_t* __restrict__ shared_act,
                                                        int T, int group, const Nvfp4Shared& sh, int o0, int hidden,
                                                        bf16_t* __restrict__ ys) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int in = sh.inter, steps = (in + 127) / 128;
  const SkinnyTokens wk = skinny_tokens<1>(T, g, 0, group);  // lanes past the group's tokens repeat its last
  const bf16_t* xg = shared_act + int64_t(wk.x_row) * in + t * 32;  // lane group g's token
  SkinnyAcc acc[1];
#pragma unroll
  for (int u = 0; u < kSteps; ++u)
    if (kFull || u < steps) {
      const bf16_t* xs[1] = {xg + u * 128};
      nvfp4_skinny_step<1>(r.qt[u], r.st[u], r.qb[u], r.sb[u], xs, kFull || u * 128 + t * 32 < in, acc);
    }
  const float s2 = sh.s2_down * kNvfp4PairUnscale;
#pragma unroll
  for (int j = 0; j < 4; ++j) {  // c[.][j]: row g (j < 2) or g + 8, token 2t + (j & 1)
    const int o = o0 + g + (j >= 2 ? 8 : 0), tok = wk.out_row0 + 2 * t + (j & 1);
    // 0.f + ...: skinny_store's sum over its one split, the same value (and sign of zero)
    if (2 * t + (j & 1) < wk.nt && o < hidden)
      ys[int64_t(tok) * hidden + o] =
          __float2bfloat16_rn(round_bf16((0.f + (acc[0].c[0][j] + acc[0].c[1][j])) * s2));
  }
}

template <bool kFull>
__global__ void __launch_bounds__(kSlotWarps * 32)
    nvfp4_moe_down_slots_mma_kernel(const bf16_t* __restrict__ act, int T, int K, Nvfp4Stack wd, int inter,
                                    int hidden, const int32_t* __restrict__ ids, Nvfp4Shared sh,
                                    const bf16_t* __restrict__ shared_act, int shared_groups,
                                    bf16_t* __restrict__ y) {
  pdl_launch_dependents();  // see launch.cuh
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  // Grid rows below shared_groups are the shared expert's token groups (nvfp4_moe_shared_skinny).
  const int group = int(blockIdx.y) < shared_groups ? int(blockIdx.y) : -1;
  const int s = int(blockIdx.y) - shared_groups;  // the slot of the other rows
  const bool shared = group >= 0 || s >= T * K;
  const int o0 = (blockIdx.x * kSlotWarps + warp) * 16;
  if (o0 >= hidden) return;  // warp-uniform
  const int in = shared ? sh.inter : inter;
  const int steps = (in + 127) / 128;
  const int top = min(o0 + g, hidden - 1), bottom = min(o0 + 8 + g, hidden - 1);
  const int64_t cb = in / 2, sbytes = in / 16;
  MmaRows r;
  float s2;
  const bf16_t* xa;
  if (shared) {  // the shared expert's rows do not depend on the routing: load them before the wait
    load_rows<kFull>(sh.down.codes + top * cb, sh.down.scales + top * sbytes, sh.down.codes + bottom * cb,
                     sh.down.scales + bottom * sbytes, in, t, 0, steps, r);
    pdl_wait();  // shared_act comes from the gate/up kernel
    if (group >= 0) {
      shared_down_token_group<kFull>(r, shared_act, T, group, sh, o0, hidden, y + int64_t(T) * K * hidden);
      return;
    }
    s2 = sh.s2_down;
    xa = shared_act + int64_t(s - T * K) * sh.inter;
  } else {
    pdl_wait();  // ids and act come from earlier kernels
    const int64_t e = ids[s];
    const uint8_t* c = wd.m.codes + e * hidden * cb;
    const uint8_t* sc = wd.m.scales + e * hidden * sbytes;
    load_rows<kFull>(c + top * cb, sc + top * sbytes, c + bottom * cb, sc + bottom * sbytes, in, t, 0, steps, r);
    s2 = wd.scale2[e];
    xa = act + int64_t(s) * inter;
  }
  float c0[4] = {0.f, 0.f, 0.f, 0.f}, c1[4] = {0.f, 0.f, 0.f, 0.f};
  dot_rows<kFull>(r, xa, in, t, 0, steps, c0, c1);
  if (t == 0) {
    s2 *= kNvfp4PairUnscale;
    bf16_t* ys = y + int64_t(s) * hidden;
    if (o0 + g < hidden) ys[o0 + g] = __float2bfloat16_rn((c0[0] + c1[0]) * s2);
    if (o0 + 8 + g < hidden) ys[o0 + 8 + g] = __float2bfloat16_rn((c0[2] + c1[2]) * s2);
  }
}

}  // namespace

bool nvfp4_moe_down_mma_fits(int K, int inter, int shared_inter) {
  return K >= 1 && K + (shared_inter > 0 ? 1 : 0) <= kMaxTopK + 1 && (inter + 127) / 128 <= kSteps &&
         (shared_inter + 127) / 128 <= kSteps;
}

void launch_nvfp4_moe_down_mma(const bf16* act, int T, int K, Nvfp4Stack down, int inter, int hidden,
                               const int32_t* topk_ids, const float* topk_w, const Nvfp4Shared* shared,
                               const bf16* shared_act, const bf16* y_shared, bf16* h, size_t smem,
                               cudaStream_t stream) {
  const bool fused = shared != nullptr && shared_act != nullptr;
  const Nvfp4Shared sh = fused ? *shared : Nvfp4Shared{};
  static const bool ready = allow_dynamic_smem(nvfp4_moe_down_mma_kernel<false>, int(kMaxDownSmem)) &&
                            allow_dynamic_smem(nvfp4_moe_down_mma_kernel<true>, int(kMaxDownSmem));
  (void)ready;
  if (smem > kMaxDownSmem) throw Error("nvfp4_moe_down_mma: " + std::to_string(smem) + " bytes of shared memory asked");
  const dim3 grid(unsigned((hidden + 15) / 16), unsigned(T));
  launch_pdl(nvfp4_down_full(inter, fused, sh.inter) ? nvfp4_moe_down_mma_kernel<true> : nvfp4_moe_down_mma_kernel<false>,
             grid, dim3((K + (fused ? 1 : 0)) * 32), smem, stream, reinterpret_cast<const bf16_t*>(act), K, down, inter,
             hidden, topk_ids, topk_w, sh, reinterpret_cast<const bf16_t*>(fused ? shared_act : nullptr),
             reinterpret_cast<const bf16_t*>(fused ? nullptr : y_shared), reinterpret_cast<bf16_t*>(h));
  STRIKER_CUDA_CHECK_LAUNCH("nvfp4_moe_down_mma");
}

void launch_nvfp4_moe_down_slots_mma(const bf16* act, int T, int K, Nvfp4Stack down, int inter, int hidden,
                                     const int32_t* topk_ids, const Nvfp4Shared* shared, const bf16* shared_act,
                                     bf16* y, cudaStream_t stream) {
  const bool fused = shared != nullptr && shared_act != nullptr;
  const Nvfp4Shared sh = fused ? *shared : Nvfp4Shared{};
  const int groups = fused && nvfp4_moe_shared_skinny(T) ? nvfp4_moe_shared_groups(T) : 0;
  const int slots = T * K + (groups > 0 ? groups : fused ? T : 0);
  const dim3 grid(unsigned((hidden + 16 * kSlotWarps - 1) / (16 * kSlotWarps)), unsigned(slots));
  launch_pdl(nvfp4_down_full(inter, fused, sh.inter) ? nvfp4_moe_down_slots_mma_kernel<true>
                                                     : nvfp4_moe_down_slots_mma_kernel<false>,
             grid, dim3(kSlotWarps * 32), 0, stream,
             reinterpret_cast<const bf16_t*>(act), T, K, down, inter, hidden, topk_ids, sh,
             reinterpret_cast<const bf16_t*>(fused ? shared_act : nullptr), groups, reinterpret_cast<bf16_t*>(y));
  STRIKER_CUDA_CHECK_LAUNCH("nvfp4_moe_down_slots_mma");
}

}  // namespace striker::cuda
