// CudaBackend::attention: the attention front (q, k = per-head RMSNorm, RoPE on sliding layers;
// k, v into the cache) and o = softmax with sinks · v for every query of the step (FLINT.md §4).
// A decode step of one token per sequence runs the front inside the split-KV decode kernel (one
// launch fewer, no q buffer), and an NVFP4 step of one token also merges the splits there when a KV
// head's fit one thread-block cluster (at most 16: every sliding layer, full layers up to ~1K keys):
// one launch for the whole attention; other steps write q and the cache with the front kernel first. Runs
// of >= 16 queries of one sequence (prefill chunks) take the tensor-core prefill kernel; every
// other query (decodes) the split-KV decode kernel, which spreads one query's long context over
// many CTAs. The front inside the split kernel at 2-64 sequences (H100, session 34, device ms, 8K
// unless said): NVFP4 2 seqs 2.977 -> 2.920, 4 3.712 -> 3.695, 8 5.169 -> 5.187, 16 (1K) 8.253 ->
// 8.232, 64 (1K) 17.073 -> 16.920; BF16 8 8.161 -> 8.180; 49 kernels fewer per step.
#include "backends/cuda/attention/attention.h"
#include "backends/cuda/attention/qk_rope_kv.h"
#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/backend/cuda_backend_state.h"

namespace striker::cuda {

void CudaBackend::attention(const StepPlan& p, int64_t l) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const DeviceLayer& L = model_.layers[size_t(l)];
  const bool sliding = c.is_sliding_layer(l);
  bf16 *k = k_cache_[size_t(l)], *v = v_cache_[size_t(l)];
  const AttentionShape shape{int(c.num_attention_heads), int(c.num_key_value_heads), int(c.head_dim),
                             kv_spec_.block_size, sliding ? int(c.sliding_window) : 0};
  AttentionQueries queries{p.positions, sliding ? p.off_sliding : p.off_full,
                           sliding ? p.tables_sliding : p.tables_full, p.T,
                           sliding ? p.max_keys_sliding : p.max_keys_full};
  const AttentionFront front{w.qkv, L.q_norm, L.k_norm, c.rms_norm_eps, sliding ? w.inv_freq : nullptr,
                             sliding ? p.slots_sliding : p.slots_full};
  queries.one_query_per_sequence = p.one_query_per_sequence;
  if (!p.use_prefill && attention_front_in_split_kernel(shape, queries)) {
    queries.merge_in_cluster = L.nv_qkv.present();  // NVFP4 only: attention.h says why
    paged_attention_with_front(front, k, v, L.sinks, shape, queries, w.scratch, w.attn, stream_);
    return;
  }
  const HeadShape hs{int(c.num_attention_heads), int(c.num_key_value_heads), int(c.head_dim)};
  qk_norm_rope_kv_write(front.qkv, p.T, hs, front.q_norm_w, front.k_norm_w, front.eps, p.positions, front.inv_freq,
                        front.slots, kv_spec_.block_size, k, v, w.q, stream_);
  if (!p.use_prefill) {
    paged_attention(w.q, k, v, L.sinks, shape, queries, w.scratch, w.attn, stream_);
    return;
  }
  prefill_attention(w.q, k, v, L.sinks, shape, queries,
                    PrefillTiles{p.prefill_tiles, p.num_prefill_tiles, p.tiled_queries, p.num_tiled}, w.scratch,
                    w.attn, stream_);
  if (p.num_rest > 0) {  // the step's short runs (decodes)
    queries.num_queries = p.num_rest;
    queries.max_keys = sliding ? p.max_keys_sliding_rest : p.max_keys_full_rest;
    queries.query_ids = p.rest_queries;
    paged_attention(w.q, k, v, L.sinks, shape, queries, w.scratch, w.attn, stream_);
  }
}

}  // namespace striker::cuda
