// CudaBackend::moe: x = rmsnorm(h), then the routed + shared experts of a MoE layer, h = bf16(h + y)
// (FLINT.md §4). The router always runs first; up to 8 tokens it normalises h itself (router_topk
// with an input norm: one launch, the norm included), above that the o_proj residual has already
// written x = rmsnorm(h) in its own pass (add_rmsnorm); then
//   decode steps (<= kGemvMaxTokens tokens; NVFP4 experts up to kMoePerSlotMaxTokensNvfp4, measured
//     faster than the grouped kernels there): kernels that read only the selected experts' rows,
//     one slot at a time, BF16 or NVFP4 (moe.h, nvfp4_moe.h), with the shared expert fused in when
//     it has the experts' format (NVFP4 from 3 tokens as skinny tiles, one per 8 tokens:
//     nvfp4_moe_shared_skinny) — measured faster than sorting 2-8 tokens' slots into expert
//     tiles (docs/performance.md, "MoE at 2-8 decode tokens"); from 2 tokens on the down
//     projection runs slot by slot into w.moe_y and a combine kernel forms h (one launch more,
//     docs/performance.md "Eighth session") and, one CTA per row, the next layer's x = rmsnorm(h)
//     (docs/performance.md "Ninth session");
//   longer steps: a device-side routing sort, then per expert tile the routed experts' GEMMs —
//     grouped mma.sync GEMMs of 16-row tiles for batched decode (moe_grouped.h), and the Hopper
//     wgmma kernels at prefill sizes (moe_grouped_wgmma.h), each distinct expert read once per tile.
#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/backend/cuda_backend_state.h"
#include "backends/cuda/elementwise/elementwise.h"
#include "backends/cuda/linear/gemv.h"
#include "backends/cuda/moe/moe.h"
#include "backends/cuda/moe/moe_grouped.h"
#include "backends/cuda/moe/moe_grouped_wgmma.h"
#include "backends/cuda/moe/moe_grouped_wgmma_nvfp4.h"
#include "backends/cuda/moe/router.h"
#include "backends/cuda/nvfp4/nvfp4_moe.h"

namespace striker::cuda {

void CudaBackend::moe(const DeviceLayer& L, int T, const float* next_norm) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const RouterShape rs{int(c.hidden_size), int(c.n_routed_experts), int(c.num_experts_per_tok), c.norm_topk_prob,
                       c.routed_scaling_factor};
  const RouterInputNorm post_norm{L.post_norm, c.rms_norm_eps, w.x};  // x = rmsnorm(h), in the router's launch
  const bool x_ready = T > kGemvMaxTokens;  // the o_proj residual wrote x (flint_forward.cpp)
  router_topk(x_ready ? w.x : w.h, T, rs, L.router_bf16, L.router_f32, L.router_bias, w.router_logits,
              w.router_counter, w.topk_ids, w.topk_w, stream_, x_ready ? nullptr : &post_norm, &w.lt);
  // NVFP4 experts stay per slot up to kMoePerSlotMaxTokensNvfp4 tokens (a BF16 shared expert beside them runs on
  // the GEMV kernels, which take at most kGemvMaxTokens).
  const bool per_slot = T <= kGemvMaxTokens || (L.nv_exp_gate.present() && L.sh_gate == nullptr &&
                                                T <= kMoePerSlotMaxTokensNvfp4);
  if (!per_slot) moe_batched(L, T, next_norm);
  else if (L.nv_exp_gate.present()) moe_decode_nvfp4(L, T, next_norm);
  else moe_decode_bf16(L, T, next_norm);
}

// BF16 routed experts of a decode step: gate/up + SwiGLU of the selected experts (and a BF16
// shared expert) in one launch, then down + weighted sum + residual in another.
void CudaBackend::moe_decode_bf16(const DeviceLayer& L, int T, const float* next_norm) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const int H = int(c.hidden_size), I = int(c.moe_intermediate_size), Is = int(c.shared_expert_intermediate_size),
            K = int(c.num_experts_per_tok);
  moe_gate_up(w.x, T, H, L.exp_gate, L.exp_up, I, w.topk_ids, K, w.moe_act, L.sh_gate, L.sh_up, Is,
              L.sh_gate ? w.shared_act : nullptr, stream_);
  const RowNorm next{next_norm, c.rms_norm_eps, w.x};  // the next layer's x = rmsnorm(h), in the combine's pass
  moe_down_combine(w.moe_act, T, K, L.exp_down, I, H, w.topk_ids, w.topk_w, L.sh_gate ? w.shared_act : nullptr,
                   L.sh_down, Is, w.h, stream_, w.moe_y, next_norm != nullptr ? &next : nullptr);
}

// NVFP4 routed experts of a decode step: the selected-experts kernels, with an NVFP4 shared
// expert fused into them, or a BF16 one run first by the BF16 GEMV kernels and added as a bf16
// vector.
void CudaBackend::moe_decode_nvfp4(const DeviceLayer& L, int T, const float* next_norm) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const int H = int(c.hidden_size), I = int(c.moe_intermediate_size), Is = int(c.shared_expert_intermediate_size),
            K = int(c.num_experts_per_tok);
  const bool shared_nv = L.nv_sh_gate.present();
  const Nvfp4Shared sh{L.nv_sh_gate.matrix(), L.nv_sh_up.matrix(), L.nv_sh_down.matrix(), L.nv_sh_gate.scale2.s[0],
                       L.nv_sh_up.scale2.s[0], L.nv_sh_down.scale2.s[0], Is};
  const RowNorm next{next_norm, c.rms_norm_eps, w.x};  // the next layer's x = rmsnorm(h), in the combine's pass
  const bf16* y_shared = nullptr;
  if (L.sh_gate) {  // BF16 shared expert: y_shared = bf16(mm(act, Wd_shared)) into w.tmp
    gemv_gate_up(w.x, T, H, L.sh_gate, L.sh_up, Is, w.act, stream_);
    gemv_bf16(w.act, T, Is, L.sh_down, H, w.tmp, stream_);
    y_shared = w.tmp;
  }
  // The gate/up CTAs request the selected experts' down rows into L2 for the down kernel (NVFP4 8K step
  // -0.012 ms, batch 8 -0.05; the same for BF16's 4x the bytes lost +0.07 ms: eighteenth session).
  const Nvfp4Matrix down_rows = L.nv_exp_down.stack().m;
  nvfp4_moe_gate_up(w.x, T, H, L.nv_exp_gate.stack(), L.nv_exp_up.stack(), I, w.topk_ids, K, w.moe_act,
                    shared_nv ? &sh : nullptr, shared_nv ? w.shared_act : nullptr, stream_, &down_rows);
  nvfp4_moe_down_combine(w.moe_act, T, K, L.nv_exp_down.stack(), I, H, w.topk_ids, w.topk_w, shared_nv ? &sh : nullptr,
                         shared_nv ? w.shared_act : nullptr, y_shared, w.h, stream_, w.moe_y,
                         next_norm != nullptr ? &next : nullptr);  // h = bf16(h + y)
}

// Routed experts of a step of more than kGemvMaxTokens tokens (batched decode or prefill), all on
// the device: the routing is counting-sorted by expert, then two launches (gate/up with SwiGLU,
// down) stream each routed expert's weights once per tile of rows, BF16 or NVFP4 (NVFP4 decoded
// exactly to bf16, the expert's scale2 applied to the fp32 sums): batched decode as 16-row mma.sync tiles (NVFP4: gate/up decoded straight into each warp's mma fragments, the down as moe_grouped_layout.h's nvfp4_down_resident_a says),
// prefill sizes as the Hopper kernels of moe_grouped_wgmma.h (NVFP4 stacks: moe_grouped_wgmma_nvfp4.h,
// decoded in registers, from 80 rows per expert; NVFP4 steps below use 64-row mma.sync tiles). No host sync, so the step can be graph-captured.
void CudaBackend::moe_batched(const DeviceLayer& L, int T, const float* next_norm) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const int H = int(c.hidden_size), I = int(c.moe_intermediate_size), Is = int(c.shared_expert_intermediate_size),
            K = int(c.num_experts_per_tok), E = int(c.n_routed_experts);
  MoeRouting r = w.routing;
  const bool nv = L.nv_exp_gate.present();
  const int64_t slots = int64_t(T) * K;
  const bool wgmma = nv ? moe_wgmma_nvfp4_for(slots, E) : moe_wgmma_for(slots, E);
  // mma.sync tiles: 16 rows for batches of 9+ decode tokens, 64 for NVFP4 steps below the wgmma threshold.
  r.tile_rows = wgmma ? kMoeWgmmaTileRows : moe_tile_rows_for(slots, E);
  const bool shared = L.sh_gate != nullptr || L.nv_sh_gate.present();
  // Batched decode (up to kMoeSharedTileMaxTokens tokens): the shared expert as expert E of the grouped
  // kernels — its rows sorted in after the routed ones, its tiles beside theirs — where it has their
  // format and width; else its own launches below.
  const bool in_tiles = !wgmma && T <= kMoeSharedTileMaxTokens && Is == I &&
                        (nv ? L.nv_sh_gate.present() : L.sh_gate != nullptr);
  const Nvfp4Shared nsh{L.nv_sh_gate.matrix(), L.nv_sh_up.matrix(), L.nv_sh_down.matrix(), L.nv_sh_gate.scale2.s[0],
                        L.nv_sh_up.scale2.s[0], L.nv_sh_down.scale2.s[0], Is};
  const Bf16SharedExpert bsh{L.sh_gate, L.sh_up, L.sh_down, Is};
  moe_route_sort(w.topk_ids, T, K, r, stream_, in_tiles ? T : 0);
  if (wgmma && nv) {
    moe_grouped_gate_up_nvfp4_direct(w.x, T, K, H, L.nv_exp_gate.stack(), L.nv_exp_up.stack(), I, r, w.a_sorted,
                                     stream_);
    moe_grouped_down_nvfp4_direct(w.a_sorted, T, K, I, L.nv_exp_down.stack(), H, r, w.y_sorted, stream_);
  } else if (wgmma) {
    moe_grouped_gate_up_wgmma(w.x, T, K, H, L.exp_gate, L.exp_up, I, nullptr, nullptr, r, w.a_sorted, stream_);
    moe_grouped_down_wgmma(w.a_sorted, T, K, I, L.exp_down, H, nullptr, r, w.y_sorted, stream_);
  } else if (nv) {
    const Nvfp4Shared* sh = in_tiles ? &nsh : nullptr;
    moe_grouped_gate_up_nvfp4(w.x, T, K, H, L.nv_exp_gate.stack(), L.nv_exp_up.stack(), I, r, w.a_sorted, stream_, sh);
    moe_grouped_down_nvfp4(w.a_sorted, T, K, I, L.nv_exp_down.stack(), H, r, w.y_sorted, stream_, sh);
  } else {
    const Bf16SharedExpert* sh = in_tiles ? &bsh : nullptr;
    moe_grouped_gate_up(w.x, T, K, H, L.exp_gate, L.exp_up, I, r, w.a_sorted, stream_, sh);
    moe_grouped_down(w.a_sorted, T, K, I, L.exp_down, H, r, w.y_sorted, stream_, sh);  // bf16(mm(a, Wd)) per row
  }
  const bf16* y_shared = nullptr;
  if (in_tiles) {
    y_shared = w.y_sorted + int64_t(T) * K * H;  // rows T·K + t: the shared expert's output of token t
  } else if (shared) {  // SwiGLU over the chunk, output in w.tmp (NVFP4: the skinny kernels up to 64 tokens, ops_linear.cpp)
    swiglu_front(w.x, T, H, L.sh_gate, L.nv_sh_gate, L.sh_up, L.nv_sh_up, Is, w.act);
    linear(w.act, T, Is, L.sh_down, L.nv_sh_down, H, w.tmp);
    y_shared = w.tmp;
  }
  const RowNorm next{next_norm, c.rms_norm_eps, w.x};  // the next layer's x = rmsnorm(h), in the combine's pass
  moe_combine_sorted(w.y_sorted, r.slot_row, w.topk_w, y_shared, T, K, H, w.h, stream_,
                     next_norm != nullptr ? &next : nullptr);
}

}  // namespace striker::cuda
