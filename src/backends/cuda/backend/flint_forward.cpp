// One step of the Flint forward pass on the GPU, in the order and with the rounding points of
// FLINT.md §4 (the CPU backend's flint_forward.cpp is the same loop on the host). Each line is
// one §4 step; which kernel runs it (BF16 or NVFP4 weights, GEMV or cuBLASLt or grouped MoE, by
// the step's token count) is the business of the op it calls (ops_linear.cpp, ops_attention.cpp,
// ops_moe.cpp). Everything is enqueued on stream_; nothing here reads device memory back.
#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/backend/cuda_backend_state.h"
#include "backends/cuda/elementwise/embedding.h"
#include "backends/cuda/elementwise/rmsnorm.h"

namespace striker::cuda {

void CudaBackend::flint_forward(const StepPlan& p) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const int T = p.T, H = int(c.hidden_size), d = int(c.head_dim), nh = int(c.num_attention_heads);

  embedding_gather(model_.embed, c.vocab_size, H, p.tokens, T, w.h, stream_);  // h = E[token]
  rmsnorm(w.h, model_.layers[0].input_norm, w.x, T, H, c.rms_norm_eps, stream_);  // x = rmsnorm(h)
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const DeviceLayer& L = model_.layers[size_t(l)];
    // Every op that writes h ends with the next norm (in decode steps inside the same kernel):
    // x = rmsnorm(h, post_attention_layernorm), then the next layer's input_layernorm.
    const float* next_input_norm = l + 1 < c.num_hidden_layers ? model_.layers[size_t(l + 1)].input_norm : nullptr;

    // Attention block.
    attention_front(p, l);  // q|k|v = bf16(mm(x, Wqkv)); q, k per-head rmsnorm, rope on sliding layers; k, v cached
    attention(p, l);        // o = softmax with sinks · v
    linear_residual(w.attn, T, nh * d, L.wo, L.nv_o, H, L.post_norm);  // h = bf16(h + bf16(mm(o, Wo))); x = rmsnorm(h)

    // Feed-forward block.
    if (c.is_dense_layer(l))
      swiglu_dense(L, T, next_input_norm);  // h = bf16(h + swiglu(x)); x = rmsnorm(h) of the next layer
    else
      moe(L, T, next_input_norm);           // h = bf16(h + y), y routed + shared; x = rmsnorm(h) of the next layer
  }
  lm_head_logits(p);  // logits = bf16(mm(rmsnorm(h), lm_head)), requested rows only
}

}  // namespace striker::cuda
