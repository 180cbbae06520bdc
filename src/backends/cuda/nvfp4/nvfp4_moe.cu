#include <algorithm>
#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/stamps.cuh"
#include "backends/cuda/moe/moe.h"
#include "backends/cuda/nvfp4/nvfp4_decode.cuh"
#include "backends/cuda/nvfp4/nvfp4_moe.h"
#include "backends/cuda/nvfp4/nvfp4_moe_mma.h"
#include "backends/cuda/nvfp4/nvfp4_moe_slots.h"
#include "backends/cuda/nvfp4/nvfp4_skinny.cuh"
#include "backends/cuda/common/warp_dot.cuh"

namespace striker::cuda {
namespace {

constexpr int kWarps = 8;
static_assert(kWarps == kSkinnyWarps, "the shared expert's skinny CTAs run in the gate/up kernel's CTAs");
constexpr int kMaxTopK = 8;

// Pointers to row `row` of expert `e` in a stack of [E, rows, in] weights.
__device__ __forceinline__ void stack_row(const Nvfp4Matrix& m, int64_t e, int64_t rows, int64_t row, int in,
                                          const uint8_t*& codes, const uint8_t*& scales) {
  const int64_t r = e * rows + row;
  codes = m.codes + r * (in / 2);
  scales = m.scales + r * (in / 16);
}

// grid (row pairs, T*K [+ T]): as moe.cu's moe_gate_up_kernel; slots >= T*K are the shared expert.
// The dot products run on tensor cores (warp_dot_nvfp4_early_mma, nvfp4_decode.cuh), one slot (one
// token) at a time for every T, so a T-token step gives each token a one-token step's bits.
// The shared expert's warps load their first two chunks before pdl_wait; a routed slot's rows
// depend on the router's ids, read after it. Held to 2 CTAs per SM (≤ 128 registers; left alone,
// ptxas takes ~160, 1 CTA per SM), so the decode grid of 32 × 7 = 224 CTAs runs in one wave on
// 132 SMs instead of two. With pf_down set (a runtime test, so the tests run the backend's instances),
// each routed CTA also requests its share (1/gridDim.x) of its expert's down rows into L2 right after
// its own weights, so the down kernel's dependent loads of those rows come from L2 (NVFP4 8K step
// -0.012 ms, batch 8 -0.05: eighteenth session).
// kSharedS > 0 (nvfp4_moe_shared_skinny): the shared expert is the first `shared_groups` rows of CTAs,
// row j for tokens 8j..8j+7, skinny GateUp tiles split kSharedS ways over k (nvfp4_skinny_cta, the
// dense gate/up's bits), so its weights are decoded once per 8 tokens instead of once per token; the
// routed slots take the rows after them. kOnePair: nvfp4_one_pair_per_lane(hidden, 1) (Flint's hidden).
// The one-pair form with the skinny shared expert (3+ tokens) is held to 3 CTAs per SM (80 registers,
// 24 warps per SM): on the H200 8 / 16 sequences -0.03 / -0.06 ms per step against 2 CTAs, even on the
// H100; at 1-2 tokens (7-14 slots of 32 CTAs) 2 CTAs were 0.04-0.05 ms faster (fortieth session).
template <int kSharedS, bool kOnePair>
constexpr int nvfp4_moe_gate_up_ctas_per_sm() { return kOnePair && kSharedS > 0 ? 3 : 2; }
template <int kSharedS = 0, bool kOnePair = false>
__global__ void __launch_bounds__(kWarps * 32, (nvfp4_moe_gate_up_ctas_per_sm<kSharedS, kOnePair>()))
    nvfp4_moe_gate_up_kernel(const bf16_t* __restrict__ x, int T, int hidden, Nvfp4Stack wg, Nvfp4Stack wu, int inter,
                             const int32_t* __restrict__ ids, int K, bf16_t* __restrict__ act, Nvfp4Shared sh,
                             bf16_t* __restrict__ shared_act, Nvfp4Matrix pf_down, int shared_groups) {
  STRIKER_STAMPS_CTA(kNvfp4MoeGateUp);  // the shared expert's CTAs: entry and exit only
  pdl_launch_dependents();  // see launch.cuh
  int slot = blockIdx.y;
  if constexpr (kSharedS > 0) {
    if (slot < shared_groups) {  // gate's scale2 at 0, up's at 1 (skinny_store)
      const RowScale2 s2{1, 2, {sh.s2_gate, sh.s2_up, sh.s2_up}};
      nvfp4_skinny_cta<kSharedS, 4, SkinnyTile::GateUp, GemvOut::Store, 1>(x, hidden, sh.gate, sh.up, sh.inter,
                                                                          shared_act, T, s2, slot);
      return;
    }
    slot -= shared_groups;  // a routed slot after the shared rows
  }
  const int o0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * 2;
  const bool shared = slot >= T * K;
  const int rows = shared ? sh.inter : inter;
  if (o0 >= rows) return;
  const int t = shared ? slot - T * K : slot_token(slot, K);
  const int o1 = min(o0 + 1, rows - 1);
  const uint8_t* cr[4];
  const uint8_t* sr[4];
  float s2g = 0.f, s2u = 0.f;
  if (shared) {
    const int64_t cb = hidden / 2, sb = hidden / 16;
    cr[0] = sh.gate.codes + o0 * cb, sr[0] = sh.gate.scales + o0 * sb;
    cr[1] = sh.up.codes + o0 * cb, sr[1] = sh.up.scales + o0 * sb;
    cr[2] = sh.gate.codes + o1 * cb, sr[2] = sh.gate.scales + o1 * sb;
    cr[3] = sh.up.codes + o1 * cb, sr[3] = sh.up.scales + o1 * sb;
    s2g = sh.s2_gate;
    s2u = sh.s2_up;
  }
  Nvfp4Prologue<4> pr;
  if (shared) warp_dot_nvfp4_prologue_mma<4, kOnePair>(cr, sr, hidden, pr);
  pdl_wait();  // ids (router) and x (rmsnorm) are written by earlier kernels
  STRIKER_STAMP(1);
  if (!shared) {
    const int64_t e = ids[slot];
    stack_row(wg.m, e, inter, o0, hidden, cr[0], sr[0]);
    stack_row(wu.m, e, inter, o0, hidden, cr[1], sr[1]);
    stack_row(wg.m, e, inter, o1, hidden, cr[2], sr[2]);
    stack_row(wu.m, e, inter, o1, hidden, cr[3], sr[3]);
    s2g = wg.scale2[e];
    s2u = wu.scale2[e];
    warp_dot_nvfp4_prologue_mma<4, kOnePair>(cr, sr, hidden, pr);
    if (pf_down.codes != nullptr) {  // this CTA's share of expert e's down rows into L2 for the down kernel
      const int64_t cbytes = int64_t(hidden) * inter / 2, sbytes = int64_t(hidden) * inter / 16;
      prefetch_l2_part(pf_down.codes + e * cbytes, cbytes, int(blockIdx.x), int(gridDim.x));
      prefetch_l2_part(pf_down.scales + e * sbytes, sbytes, int(blockIdx.x), int(gridDim.x));
    }
  }
  float acc[4][1];
  warp_dot_nvfp4_early_mma<4, false, E2m1Pairs::kMultiply, kOnePair>(pr, cr, sr, x + int64_t(t) * hidden, hidden, acc);
  STRIKER_STAMP(3);
  const int lane = threadIdx.x & 31;
  if (lane < 2 && o0 + lane < rows) {
    const float gv = round_bf16((lane == 0 ? acc[0][0] : acc[2][0]) * s2g);
    const float uv = round_bf16((lane == 0 ? acc[1][0] : acc[3][0]) * s2u);
    bf16_t* dst = shared ? shared_act + int64_t(t) * sh.inter : act + int64_t(slot) * inter;
    dst[o0 + lane] = __float2bfloat16_rn(silu_bf16(gv) * uv);
  }
}

// grid (row pairs, T): each warp produces two rows of the token's MoE output (as moe.cu's
// moe_down_kernel). Taken when inter or the fused shared expert's inter is above 512 (else the
// tensor-core kernels of nvfp4_moe_mma.cu); on CUDA cores (group_dot), so those shapes keep other
// bits. All K experts' code chunks are loaded before any is used (K <= 8,
// unrolled), so a lane has up to 16 weight loads in flight instead of one expert's at a time.
__global__ void __launch_bounds__(kWarps * 32)
    nvfp4_moe_down_kernel(const bf16_t* __restrict__ act, int K, Nvfp4Stack wd, int inter, int hidden,
                          const int32_t* __restrict__ ids, const float* __restrict__ topk_w, Nvfp4Shared sh,
                          const bf16_t* __restrict__ shared_act, const bf16_t* __restrict__ y_shared,
                          bf16_t* __restrict__ h) {
  STRIKER_STAMPS_CTA(kNvfp4MoeDown);
  pdl_grid_start();  // see launch.cuh
  STRIKER_STAMP(1);
  const int o0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * 2;
  if (o0 >= hidden) return;
  const int t = blockIdx.y;
  const int o1 = min(o0 + 1, hidden - 1);
  const int lane = threadIdx.x & 31;
  const uint8_t *c0[kMaxTopK], *c1[kMaxTopK], *s0[kMaxTopK], *s1[kMaxTopK];
  const bf16_t* xa[kMaxTopK];
  float acc0[kMaxTopK], acc1[kMaxTopK];
#pragma unroll
  for (int k = 0; k < kMaxTopK; ++k) {
    const int slot = t * K + min(k, K - 1);  // k >= K: valid pointers, never loaded
    const int64_t e = ids[slot];
    stack_row(wd.m, e, hidden, o0, inter, c0[k], s0[k]);
    stack_row(wd.m, e, hidden, o1, inter, c1[k], s1[k]);
    xa[k] = act + int64_t(slot) * inter;
    acc0[k] = acc1[k] = 0.f;
  }
  for (int c = lane; c < inter / 32; c += 32) {  // 16-byte chunks: 32 weights, 2 scale bytes
    uint4 q0[kMaxTopK], q1[kMaxTopK];
    uint32_t sc0[kMaxTopK], sc1[kMaxTopK];
#pragma unroll
    for (int k = 0; k < kMaxTopK; ++k)
      if (k < K) {
        q0[k] = load_stream(c0[k] + int64_t(c) * 16);
        q1[k] = load_stream(c1[k] + int64_t(c) * 16);
        sc0[k] = __ldcs(reinterpret_cast<const unsigned short*>(s0[k] + int64_t(c) * 2));
        sc1[k] = __ldcs(reinterpret_cast<const unsigned short*>(s1[k] + int64_t(c) * 2));
      }
#pragma unroll
    for (int k = 0; k < kMaxTopK; ++k)
      if (k < K) {
        const bf16_t* xp = xa[k] + int64_t(c) * 32;
        acc0[k] += group_dot(q0[k].x, q0[k].y, sc0[k], xp) + group_dot(q0[k].z, q0[k].w, sc0[k] >> 8, xp + 16);
        acc1[k] += group_dot(q1[k].x, q1[k].y, sc1[k], xp) + group_dot(q1[k].z, q1[k].w, sc1[k] >> 8, xp + 16);
      }
  }
  float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
  for (int k = 0; k < kMaxTopK; ++k)
    if (k < K) {
      const int slot = t * K + k;
      const float wk = topk_w[slot], s2 = wd.scale2[ids[slot]];
      sum0 = fmaf(wk, round_bf16(warp_sum(acc0[k]) * s2), sum0);  // Σ_k w_k·bf16(mm(act_k, Wd_e)), fp32
      sum1 = fmaf(wk, round_bf16(warp_sum(acc1[k]) * s2), sum1);
    }
  float y0 = round_bf16(sum0), y1 = round_bf16(sum1);
  if (shared_act != nullptr) {
    const int64_t cb = sh.inter / 2, sb = sh.inter / 16;
    const uint8_t* cr[2] = {sh.down.codes + o0 * cb, sh.down.codes + o1 * cb};
    const uint8_t* sr[2] = {sh.down.scales + o0 * sb, sh.down.scales + o1 * sb};
    float sacc[2][1];
    warp_dot_nvfp4<2, 1>(cr, sr, shared_act + int64_t(t) * sh.inter, 0, 1, sh.inter, sacc);
    y0 = round_bf16(y0 + round_bf16(sacc[0][0] * sh.s2_down));
    y1 = round_bf16(y1 + round_bf16(sacc[1][0] * sh.s2_down));
  } else if (y_shared != nullptr) {
    y0 = round_bf16(y0 + __bfloat162float(y_shared[int64_t(t) * hidden + o0]));
    y1 = round_bf16(y1 + __bfloat162float(y_shared[int64_t(t) * hidden + o1]));
  }
  if (lane < 2 && o0 + lane < hidden) {
    const int64_t idx = int64_t(t) * hidden + o0 + lane;
    h[idx] = __float2bfloat16_rn(__bfloat162float(h[idx]) + (lane == 0 ? y0 : y1));
  }
}

void check_width(const char* what, int width) {
  if (width <= 0 || width % 64 != 0)
    throw Error(std::string(what) + ": width " + std::to_string(width) + " is not a positive multiple of 64");
}

}  // namespace

void nvfp4_moe_gate_up(const bf16* x, int T, int hidden, Nvfp4Stack gate, Nvfp4Stack up, int inter,
                       const int32_t* topk_ids, int K, bf16* act, const Nvfp4Shared* shared, bf16* shared_act,
                       cudaStream_t stream, const Nvfp4Matrix* prefetch_down) {
  if (T <= 0) return;
  check_width("nvfp4_moe_gate_up", hidden);
  const bool has_shared = shared != nullptr && shared_act != nullptr;
  if (int64_t(T) * (K + 1) > 65535)
    throw Error("nvfp4_moe_gate_up: " + std::to_string(T) + " tokens x " + std::to_string(K + 1) +
                " slots exceed one launch (65535); split the batch");
  const Nvfp4Shared sh = has_shared ? *shared : Nvfp4Shared{};
  const int rows = std::max(inter, has_shared ? sh.inter : 0);
  const auto* xd = reinterpret_cast<const bf16_t*>(x);
  auto* ad = reinterpret_cast<bf16_t*>(act);
  auto* sd = reinterpret_cast<bf16_t*>(has_shared ? shared_act : nullptr);
  const Nvfp4Matrix pf = prefetch_down != nullptr ? *prefetch_down : Nvfp4Matrix{};
  const bool one_pair = nvfp4_one_pair_per_lane(hidden, 1);
  if (has_shared && nvfp4_moe_shared_skinny(T)) {
    const int S = skinny_split((hidden + 127) / 128, 4);  // the dense gate/up's split
    const int gx = std::max((rows + 2 * kWarps - 1) / (2 * kWarps),
                            int(skinny_grid<SkinnyTile::GateUp>(sh.inter, S, T).x));
    const int groups = nvfp4_moe_shared_groups(T);
    const dim3 grid(unsigned(gx), unsigned(T * K + groups));
    skinny_dispatch<false>(S, false, [&](auto s, auto) {
      constexpr int kS = decltype(s)::value;
      auto launch = [&](auto kernel) {
        launch_pdl(kernel, grid, dim3(kWarps * 32), 0, stream, xd, T, hidden, gate, up, inter, topk_ids, K, ad, sh,
                   sd, pf, groups);
      };
      if (one_pair) launch(nvfp4_moe_gate_up_kernel<kS, true>);
      else launch(nvfp4_moe_gate_up_kernel<kS, false>);
    });
  } else {
    const dim3 grid(unsigned((rows + 2 * kWarps - 1) / (2 * kWarps)), unsigned(T * K + (has_shared ? T : 0)));
    auto launch = [&](auto kernel) {
      launch_pdl(kernel, grid, dim3(kWarps * 32), 0, stream, xd, T, hidden, gate, up, inter, topk_ids, K, ad, sh, sd,
                 pf, 0);
    };
    if (one_pair) launch(nvfp4_moe_gate_up_kernel<0, true>);
    else launch(nvfp4_moe_gate_up_kernel<0, false>);
  }
  STRIKER_CUDA_CHECK_LAUNCH("nvfp4_moe_gate_up");
}

void nvfp4_moe_down_combine(const bf16* act, int T, int K, Nvfp4Stack down, int inter, int hidden,
                            const int32_t* topk_ids, const float* topk_w, const Nvfp4Shared* shared,
                            const bf16* shared_act, const bf16* y_shared, bf16* h, cudaStream_t stream,
                            bf16* y_scratch, const RowNorm* next_norm) {
  if (T <= 0) return;
  if (K <= 0 || K > kMaxTopK) throw Error("nvfp4_moe_down_combine: top-k " + std::to_string(K) + " is not in 1..8");
  if (T > 65535) throw Error("nvfp4_moe_down_combine: " + std::to_string(T) + " tokens exceed one launch");
  check_width("nvfp4_moe_down_combine", inter);
  const bool fused_shared = shared != nullptr && shared_act != nullptr;
  if (fused_shared) check_width("nvfp4_moe_down_combine (shared)", shared->inter);
  const Nvfp4Shared sh = fused_shared ? *shared : Nvfp4Shared{};
  const bool mma = inter <= 512 && (!fused_shared || sh.inter <= 512);  // nvfp4_moe_down_mma_fits (K <= 8)
  if (mma && y_scratch != nullptr && T >= 2) {
    const int slots = T * K + (fused_shared ? T : 0);
    if (slots > kMaxGridYZ) throw Error("nvfp4_moe_down_combine: " + std::to_string(slots) + " slots exceed one launch");
    launch_nvfp4_moe_down_slots_mma(act, T, K, down, inter, hidden, topk_ids, shared, shared_act, y_scratch, stream);
    moe_combine_sorted(y_scratch, nullptr, topk_w, fused_shared ? y_scratch + int64_t(T) * K * hidden : y_shared, T,
                       K, hidden, h, stream, next_norm);
    return;
  }
  if (mma) {
    // One token: the launch reserves 200 KiB of shared memory the kernel never uses, so one of the
    // next layer's QKV CTAs (80 registers, 13 KiB) fits beside each down CTA instead of two (by
    // registers) — fewer early weight streams competing with this kernel's, one still resident early.
    // Measured (H200, thirteenth session, NVFP4 8K step, on the CUDA-core form of this kernel): 2.300 ms
    // with none reserved, 2.122 with 200 KiB, 2.210 with 216 KiB (no QKV CTA beside it).
    constexpr size_t kOneTokenSmem = 200 * 1024;
    launch_nvfp4_moe_down_mma(act, T, K, down, inter, hidden, topk_ids, topk_w, shared, shared_act, y_shared, h,
                              T == 1 ? kOneTokenSmem : size_t(0), stream);
    if (next_norm != nullptr) rmsnorm(h, next_norm->gamma, next_norm->out, T, hidden, next_norm->eps, stream);
    return;
  }
  const dim3 grid(unsigned((hidden + 2 * kWarps - 1) / (2 * kWarps)), unsigned(T));
  launch_pdl(nvfp4_moe_down_kernel, grid, dim3(kWarps * 32), 0, stream, reinterpret_cast<const bf16_t*>(act), K, down,
             inter, hidden, topk_ids, topk_w, sh, reinterpret_cast<const bf16_t*>(fused_shared ? shared_act : nullptr),
             reinterpret_cast<const bf16_t*>(fused_shared ? nullptr : y_shared), reinterpret_cast<bf16_t*>(h));
  STRIKER_CUDA_CHECK_LAUNCH("nvfp4_moe_down_combine");
  if (next_norm != nullptr) rmsnorm(h, next_norm->gamma, next_norm->out, T, hidden, next_norm->eps, stream);
}

}  // namespace striker::cuda
