// CudaBackend: the layer loop, which reads like FLINT.md §4, and the linear/MoE dispatch it
// calls (GEMV kernels up to 8 tokens, cuBLASLt and grouped tensor-core kernels above; BF16 or NVFP4).
#include "backends/cuda/attention/attention.h"
#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/backend/cuda_backend_state.h"
#include "backends/cuda/elementwise/elementwise.h"
#include "backends/cuda/elementwise/embedding.h"
#include "backends/cuda/linear/gemm_lt.h"
#include "backends/cuda/linear/gemv.h"
#include "backends/cuda/moe/moe.h"
#include "backends/cuda/moe/moe_grouped.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "backends/cuda/nvfp4/nvfp4_moe.h"
#include "backends/cuda/nvfp4/nvfp4_prefill.h"
#include "backends/cuda/attention/qk_rope_kv.h"
#include "backends/cuda/elementwise/rmsnorm.h"
#include "backends/cuda/moe/router.h"

namespace striker::cuda {

void CudaBackend::linear(const bf16* x, int T, int in, const bf16* W, int out, bf16* y) {
  if (T <= kGemvMaxTokens) gemv_bf16(x, T, in, W, out, y, stream_);
  else ws_->lt.gemm_bf16(x, T, in, W, out, y, stream_);
}

void CudaBackend::linear_residual(const bf16* x, int T, int in, const bf16* W, int out, bf16* h) {
  if (T <= kGemvMaxTokens) {
    gemv_residual(x, T, in, W, out, h, stream_);
  } else {
    ws_->lt.gemm_bf16(x, T, in, W, out, ws_->tmp, stream_);
    residual_add(h, ws_->tmp, int64_t(T) * out, stream_);
  }
}

void CudaBackend::linear(const bf16* x, int T, int in, const bf16* W, const Nvfp4Linear& q, int out, bf16* y) {
  if (!q.present()) return linear(x, T, in, W, out, y);
  if (T <= kGemvMaxTokens) nvfp4_gemv(x, T, in, q.matrix(), q.scale2, out, y, stream_);
  else nvfp4_gemm(ws_->lt, x, T, in, q.matrix(), q.scale2, out, y, out, ws_->nv_scratch, stream_);
}

void CudaBackend::linear_residual(const bf16* x, int T, int in, const bf16* W, const Nvfp4Linear& q, int out,
                                  bf16* h) {
  if (!q.present()) return linear_residual(x, T, in, W, out, h);
  if (T <= kGemvMaxTokens) {
    nvfp4_gemv_residual(x, T, in, q.matrix(), q.scale2, out, h, stream_);
  } else {
    nvfp4_gemm(ws_->lt, x, T, in, q.matrix(), q.scale2, out, ws_->tmp, out, ws_->nv_scratch, stream_);
    residual_add(h, ws_->tmp, int64_t(T) * out, stream_);
  }
}

// NVFP4 routed experts of a decode step (T <= 8): the selected-experts kernels, with an NVFP4
// shared expert fused into them, or a BF16 one run first by the BF16 GEMV kernels and added as a
// bf16 vector. (Larger steps take moe_batched, as BF16 experts do.)
void CudaBackend::moe_nvfp4(const DeviceLayer& L, int T) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const int H = int(c.hidden_size), I = int(c.moe_intermediate_size), Is = int(c.shared_expert_intermediate_size),
            K = int(c.num_experts_per_tok);
  const bool shared_nv = L.nv_sh_gate.present();
  const Nvfp4Shared sh{L.nv_sh_gate.matrix(), L.nv_sh_up.matrix(), L.nv_sh_down.matrix(), L.nv_sh_gate.scale2.s[0],
                       L.nv_sh_up.scale2.s[0], L.nv_sh_down.scale2.s[0], Is};
  const bf16* y_shared = nullptr;
  if (L.sh_gate) {  // BF16 shared expert: y_shared = bf16(mm(act, Wd_shared)) into w.tmp
    gemv_gate_up(w.x, T, H, L.sh_gate, L.sh_up, Is, w.act, stream_);
    gemv_bf16(w.act, T, Is, L.sh_down, H, w.tmp, stream_);
    y_shared = w.tmp;
  }
  nvfp4_moe_gate_up(w.x, T, H, L.nv_exp_gate.stack(), L.nv_exp_up.stack(), I, w.topk_ids, K, w.moe_act,
                    shared_nv ? &sh : nullptr, shared_nv ? w.shared_act : nullptr, stream_);
  nvfp4_moe_down_combine(w.moe_act, T, K, L.nv_exp_down.stack(), I, H, w.topk_ids, w.topk_w, shared_nv ? &sh : nullptr,
                         shared_nv ? w.shared_act : nullptr, y_shared, w.h, stream_);  // h = bf16(h + y)
}

// Routed experts of a step above 8 tokens (batched decode or prefill), all on the device: the
// routing is counting-sorted by expert, then two grouped tensor-core launches (gate/up with
// SwiGLU, down) stream each routed expert's weights once per tile of rows, BF16 or NVFP4 (the
// NVFP4 kernels decode the weight tiles in shared memory and apply the expert's scale2). No host
// sync, so the step can be graph-captured.
void CudaBackend::moe_batched(const DeviceLayer& L, int T) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const int H = int(c.hidden_size), I = int(c.moe_intermediate_size), Is = int(c.shared_expert_intermediate_size),
            K = int(c.num_experts_per_tok), E = int(c.n_routed_experts);
  MoeRouting r = w.routing;
  r.tile_rows = moe_tile_rows_for(int64_t(T) * K, E);
  moe_route_sort(w.topk_ids, T, K, r, stream_);
  if (L.nv_exp_gate.present()) {
    moe_grouped_gate_up_nvfp4(w.x, T, K, H, L.nv_exp_gate.stack(), L.nv_exp_up.stack(), I, r, w.a_sorted, stream_);
    moe_grouped_down_nvfp4(w.a_sorted, T, K, I, L.nv_exp_down.stack(), H, r, w.y_sorted, stream_);
  } else {
    moe_grouped_gate_up(w.x, T, K, H, L.exp_gate, L.exp_up, I, r, w.a_sorted, stream_);
    moe_grouped_down(w.a_sorted, T, K, I, L.exp_down, H, r, w.y_sorted, stream_);  // bf16(mm(a, Wd)) per row
  }
  // Shared expert, in its own format (NVFP4: dequantise + cuBLASLt with alpha = scale2; BF16:
  // cuBLASLt): plain SwiGLU over the chunk, output in w.tmp.
  const bool shared = L.sh_gate != nullptr || L.nv_sh_gate.present();
  if (shared) {
    linear(w.x, T, H, L.sh_gate, L.nv_sh_gate, Is, w.gate);
    linear(w.x, T, H, L.sh_up, L.nv_sh_up, Is, w.up);
    swiglu_act(w.gate, w.up, w.act, int64_t(T) * Is, stream_);
    linear(w.act, T, Is, L.sh_down, L.nv_sh_down, H, w.tmp);
  }
  moe_combine_sorted(w.y_sorted, r.slot_row, w.topk_w, shared ? w.tmp : nullptr, T, K, H, w.h, stream_);
}

void CudaBackend::run_layers(const StepPlan& p) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const int T = p.T, H = int(c.hidden_size), d = int(c.head_dim), nh = int(c.num_attention_heads),
            nkv = int(c.num_key_value_heads), K = int(c.num_experts_per_tok), B = kv_spec_.block_size;
  const int qkv_dim = (nh + 2 * nkv) * d, I = int(c.moe_intermediate_size),
            Is = int(c.shared_expert_intermediate_size), Id = int(c.intermediate_size);
  const float eps = c.rms_norm_eps;
  const HeadShape hs{nh, nkv, d};
  const RouterShape rs{H, int(c.n_routed_experts), K, c.norm_topk_prob, c.routed_scaling_factor};
  auto decode_attention = [&](int64_t l, const AttentionShape& shape, const AttentionQueries& queries) {
    const DeviceLayer& L = model_.layers[size_t(l)];
    paged_attention(w.q, k_cache_[size_t(l)], v_cache_[size_t(l)], L.sinks, shape, queries, w.scratch, w.attn,
                    stream_);
  };

  embedding_gather(model_.embed, c.vocab_size, H, p.tokens, T, w.h, stream_);  // h = E[token]
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const DeviceLayer& L = model_.layers[size_t(l)];
    const bool sliding = c.is_sliding_layer(l);
    rmsnorm(w.h, L.input_norm, w.x, T, H, eps, stream_);                             // x = rmsnorm(h)
    linear(w.x, T, H, L.wqkv, L.nv_qkv, qkv_dim, w.qkv);                             // q|k|v = bf16(mm(x, Wqkv))
    qk_norm_rope_kv_write(w.qkv, T, hs, L.q_norm, L.k_norm, eps, p.positions,        // per-head norm, RoPE on
                          sliding ? w.inv_freq : nullptr,                            // sliding layers, k/v into
                          sliding ? p.slots_sliding : p.slots_full, B,               // the paged cache
                          k_cache_[size_t(l)], v_cache_[size_t(l)], w.q, stream_);
    const AttentionShape shape{nh, nkv, d, B, sliding ? int(c.sliding_window) : 0};
    const AttentionQueries queries{p.positions, sliding ? p.off_sliding : p.off_full,
                                   sliding ? p.tables_sliding : p.tables_full, T,
                                   sliding ? p.max_keys_sliding : p.max_keys_full};
    if (p.use_prefill) {                                                             // o = softmax with sinks · v
      prefill_attention(w.q, k_cache_[size_t(l)], v_cache_[size_t(l)], L.sinks, shape, queries,
                        PrefillTiles{p.prefill_tiles, p.num_prefill_tiles, p.tiled_queries, p.num_tiled}, w.scratch,
                        w.attn, stream_);
      if (p.num_rest > 0) {  // the step's short runs (decodes): split-KV decode kernel
        AttentionQueries rest = queries;
        rest.num_queries = p.num_rest;
        rest.max_keys = sliding ? p.max_keys_sliding_rest : p.max_keys_full_rest;
        rest.query_ids = p.rest_queries;
        decode_attention(l, shape, rest);
      }
    } else {
      decode_attention(l, shape, queries);
    }
    linear_residual(w.attn, T, nh * d, L.wo, L.nv_o, H, w.h);                        // h = bf16(h + bf16(mm(o, Wo)))
    rmsnorm(w.h, L.post_norm, w.x, T, H, eps, stream_);                              // x = rmsnorm(h)
    if (c.is_dense_layer(l)) {                                                       // y = swiglu_dense(x)
      if (T <= kGemvMaxTokens && L.gate && L.up) {
        gemv_gate_up(w.x, T, H, L.gate, L.up, Id, w.act, stream_);
      } else if (T <= kGemvMaxTokens && L.nv_gate.present() && L.nv_up.present()) {
        nvfp4_gemv_gate_up(w.x, T, H, L.nv_gate.matrix(), L.nv_gate.scale2.s[0], L.nv_up.matrix(),
                           L.nv_up.scale2.s[0], Id, w.act, stream_);
      } else {  // prefill, or gate and up in different formats
        linear(w.x, T, H, L.gate, L.nv_gate, Id, w.gate);
        linear(w.x, T, H, L.up, L.nv_up, Id, w.up);
        swiglu_act(w.gate, w.up, w.act, int64_t(T) * Id, stream_);
      }
      linear_residual(w.act, T, Id, L.down, L.nv_down, H, w.h);                      // h = bf16(h + y)
    } else {                                                                         // routed top-K + shared
      router_topk(w.x, T, rs, L.router_bf16, L.router_f32, L.router_bias, w.router_logits, w.topk_ids, w.topk_w,
                  stream_);
      if (T > kGemvMaxTokens) {
        moe_batched(L, T);                                                           // h = bf16(h + y)
      } else if (L.nv_exp_gate.present()) {
        moe_nvfp4(L, T);                                                             // h = bf16(h + y)
      } else {  // decode: read only the selected experts' rows
        moe_gate_up(w.x, T, H, L.exp_gate, L.exp_up, I, w.topk_ids, K, w.moe_act, L.sh_gate, L.sh_up, Is,
                    L.sh_gate ? w.shared_act : nullptr, stream_);
        moe_down_combine(w.moe_act, T, K, L.exp_down, I, H, w.topk_ids, w.topk_w, L.sh_gate ? w.shared_act : nullptr,
                         L.sh_down, Is, w.h, stream_);                               // h = bf16(h + y)
      }
    }
  }
  // logits = bf16(mm(rmsnorm(h), lm_head)) for the requested rows only.
  embedding_gather(w.h, T, H, p.logit_rows, p.rows, w.logit_x, stream_);
  rmsnorm(w.logit_x, model_.final_norm, w.logit_x, p.rows, H, eps, stream_);
  if (model_.nv_lm_head.present()) {
    const Nvfp4Linear& q = model_.nv_lm_head;
    if (p.rows <= kGemvMaxTokens) {
      nvfp4_gemv_logits(w.logit_x, p.rows, H, q.matrix(), q.scale2, int(c.vocab_size), w.logits, stream_);
    } else {
      nvfp4_gemm(w.lt, w.logit_x, p.rows, H, q.matrix(), q.scale2, int(c.vocab_size), w.logits_bf16,
                 int(c.vocab_size), w.nv_scratch, stream_);
      bf16_to_f32(w.logits_bf16, w.logits, int64_t(p.rows) * c.vocab_size, stream_);
    }
  } else if (p.rows <= kGemvMaxTokens) {
    gemv_logits(w.logit_x, p.rows, H, model_.lm_head, int(c.vocab_size), w.logits, stream_);
  } else {
    w.lt.gemm_bf16(w.logit_x, p.rows, H, model_.lm_head, int(c.vocab_size), w.logits_bf16, stream_);
    bf16_to_f32(w.logits_bf16, w.logits, int64_t(p.rows) * c.vocab_size, stream_);
  }
}

}  // namespace striker::cuda
