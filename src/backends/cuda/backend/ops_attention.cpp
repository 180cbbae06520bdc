// CudaBackend::attention_front: the QKV projection and the attention front (q/k norm, RoPE, KV
// write): decode steps (1..8 tokens) in one launch (qkv_front.h), longer steps as the projection
// (cuBLASLt) then qk_norm_rope_kv_write.
// CudaBackend::attention: o = softmax with sinks · v for every query of the step (FLINT.md §4).
// Runs of >= 16 queries of one sequence (prefill chunks) take the tensor-core prefill kernel;
// every other query (decodes) the split-KV decode kernel, which spreads one query's long context
// over many CTAs.
#include <cstdlib>

#include "backends/cuda/attention/attention.h"
#include "backends/cuda/attention/qk_rope_kv.h"
#include "backends/cuda/attention/qkv_front.h"
#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/backend/cuda_backend_state.h"

namespace striker::cuda {

// TEMPORARY, for one A/B run on the H200 (GPU_RUN.sh), deleted after it: STRIKER_AB_UNFUSED=1 runs
// decode steps with the two-launch attention front and attention (split + combine kernels).
namespace {
bool ab_unfused() {
  static const bool unfused = std::getenv("STRIKER_AB_UNFUSED") != nullptr;
  return unfused;
}
}  // namespace

void CudaBackend::attention_front(const StepPlan& p, int64_t l) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const DeviceLayer& L = model_.layers[size_t(l)];
  const bool sliding = c.is_sliding_layer(l);
  const int T = p.T, H = int(c.hidden_size);
  const HeadShape hs{int(c.num_attention_heads), int(c.num_key_value_heads), int(c.head_dim)};
  const AttentionFront f{hs,
                         L.q_norm,
                         L.k_norm,
                         c.rms_norm_eps,
                         p.positions,
                         sliding ? w.inv_freq : nullptr,
                         sliding ? p.slots_sliding : p.slots_full,
                         kv_spec_.block_size,
                         k_cache_[size_t(l)],
                         v_cache_[size_t(l)],
                         w.q};
  if (qkv_front_supported(T, hs) && !ab_unfused()) {
    if (L.nv_qkv.present()) qkv_front_nvfp4(w.x, T, H, L.nv_qkv.matrix(), L.nv_qkv.scale2, f, nullptr, stream_);
    else qkv_front_bf16(w.x, T, H, L.wqkv, f, nullptr, stream_);
    return;
  }
  linear(w.x, T, H, L.wqkv, L.nv_qkv, (hs.n_heads + 2 * hs.n_kv_heads) * hs.head_dim, w.qkv);
  qk_norm_rope_kv_write(w.qkv, T, hs, f.q_norm_w, f.k_norm_w, f.eps, f.positions, f.inv_freq, f.slots, f.block_size,
                        f.k_cache, f.v_cache, f.q_out, stream_);
}

void CudaBackend::attention(const StepPlan& p, int64_t l) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const DeviceLayer& L = model_.layers[size_t(l)];
  const bool sliding = c.is_sliding_layer(l);
  const bf16 *k = k_cache_[size_t(l)], *v = v_cache_[size_t(l)];
  const AttentionShape shape{int(c.num_attention_heads), int(c.num_key_value_heads), int(c.head_dim),
                             kv_spec_.block_size, sliding ? int(c.sliding_window) : 0};
  AttentionQueries queries{p.positions, sliding ? p.off_sliding : p.off_full,
                           sliding ? p.tables_sliding : p.tables_full, p.T,
                           sliding ? p.max_keys_sliding : p.max_keys_full};
  AttentionScratch scratch = w.scratch;
  if (ab_unfused()) scratch.counters = nullptr;
  if (!p.use_prefill) {
    paged_attention(w.q, k, v, L.sinks, shape, queries, scratch, w.attn, stream_);
    return;
  }
  prefill_attention(w.q, k, v, L.sinks, shape, queries,
                    PrefillTiles{p.prefill_tiles, p.num_prefill_tiles, p.tiled_queries, p.num_tiled}, w.scratch,
                    w.attn, stream_);
  if (p.num_rest > 0) {  // the step's short runs (decodes)
    queries.num_queries = p.num_rest;
    queries.max_keys = sliding ? p.max_keys_sliding_rest : p.max_keys_full_rest;
    queries.query_ids = p.rest_queries;
    paged_attention(w.q, k, v, L.sinks, shape, queries, scratch, w.attn, stream_);
  }
}

}  // namespace striker::cuda
