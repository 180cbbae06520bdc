// One step of the Flint forward pass on the GPU, in the order and with the rounding points of
// FLINT.md §4 (the CPU backend's flint_forward.cpp is the same loop on the host). Each line is
// one §4 step; which kernel runs it (BF16 or NVFP4 weights, GEMV or cuBLASLt or grouped MoE, by
// the step's token count) is the business of the op it calls (ops_linear.cpp, ops_attention.cpp,
// ops_moe.cpp). Everything is enqueued on stream_; nothing here reads device memory back.
#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/backend/cuda_backend_state.h"
#include "backends/cuda/elementwise/embedding.h"

namespace striker::cuda {

void CudaBackend::flint_forward(const StepPlan& p) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const int T = p.T, H = int(c.hidden_size), d = int(c.head_dim), nh = int(c.num_attention_heads),
            nkv = int(c.num_key_value_heads);
  const int qkv_dim = (nh + 2 * nkv) * d;

  embedding_gather(model_.embed, c.vocab_size, H, p.tokens, T, w.h, stream_);  // h = E[token]
  // x = rmsnorm(h) in front of a layer's first op: one token, formed by that op's GEMV itself (every
  // CTA normalises the 4 KB row: no separate launch, ops_linear.cpp); longer steps, written by the
  // previous layer's last pass (in the residual's or the MoE combine's pass where one CTA holds a
  // whole row of h: prefill, MoE layers of 2-8 tokens; else by the rmsnorm kernel right after it).
  const bool norm_in_gemv = T == 1;
  bool x_ready = false;  // x = rmsnorm(h) of this layer already written by the previous layer's last pass
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const DeviceLayer& L = model_.layers[size_t(l)];
    const float* next_norm =
        !norm_in_gemv && l + 1 < c.num_hidden_layers ? model_.layers[size_t(l + 1)].input_norm : nullptr;

    // Attention block.
    linear(x_ready ? w.x : w.h, T, H, L.wqkv, L.nv_qkv, qkv_dim, w.qkv,             // q|k|v = bf16(mm(x, Wqkv)),
           x_ready ? nullptr : L.input_norm);                                       // x = rmsnorm(h)
    attention(p, l);  // q, k = per-head rmsnorm, rope on sliding layers; k, v into the cache;
                      // o = softmax with sinks · v
    // h = bf16(h + bf16(mm(o, Wo))); above 8 tokens also x = rmsnorm(h), in the residual's pass.
    const bool post_norm_fused = T > kGemvMaxTokens;
    linear_residual(w.attn, T, nh * d, L.wo, L.nv_o, H, w.h, post_norm_fused ? L.post_norm : nullptr);

    // Feed-forward block.
    if (c.is_dense_layer(l)) {
      swiglu_dense(L, T, post_norm_fused ? nullptr : L.post_norm, next_norm);  // h = bf16(h + swiglu(x)),
                                                                                 // x = rmsnorm(h)
    } else {
      moe(L, T, next_norm);  // x = rmsnorm(h) (decode: in the router's launch); h = bf16(h + y), y routed + shared
    }
    x_ready = next_norm != nullptr;
  }
  lm_head_logits(p);  // logits = bf16(mm(rmsnorm(h), lm_head)), requested rows only
}

}  // namespace striker::cuda
