// Paged attention over the KV cache (FLINT.md §4): each query token attends to keys at positions
// lo..p of its own sequence (lo = p-W+1 on sliding layers, 0 on full layers), with one sink
// logit per query head. The 8 query heads of a KV head are processed together, so each key and
// value is read from memory once per query token. Keys are split across CTAs (split-KV); a
// second kernel merges the splits and adds the sink to the denominator.
//
// Decode is NQ queries of different sequences at one position each; prefill of a chunk is NQ
// queries of one sequence at consecutive positions (its k, v already written to the cache, so
// causality is the per-query key range). Both can run through this entry point; prefill chunks
// of >= 16 queries go to prefill_attention below, which reads each key once per 16 queries.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "core/bf16.h"

namespace striker::cuda {

struct AttentionShape {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;     // 32, 64 or 128
  int block_size = 0;   // tokens per cache block
  int window = 0;       // sliding window W (keys p-W+1 .. p); 0 = full attention
};

// Device-side per-query metadata (all arrays [NQ]):
struct AttentionQueries {
  const int32_t* positions = nullptr;     // p of each query
  const int32_t* table_offset = nullptr;  // where the query's block table starts in `block_tables`
  const int32_t* block_tables = nullptr;  // logical block -> physical block, concatenated per sequence
  int num_queries = 0;                    // NQ
  int max_keys = 0;                       // upper bound on keys any query sees (host-side, sizes the split)
  // Optional [NQ] list of the query indices to process (into positions, table_offset, q and out);
  // nullptr = queries 0..NQ-1. Lets a step run only its decode-like queries here while its long
  // prefill runs go to prefill_attention (paged_attention only; prefill_attention rejects it).
  const int32_t* query_ids = nullptr;
  // At most this many splits of each query's keys per KV head (0: the planner's count, about one wave of
  // CTAs). The backend takes the planner's; the GPU tests set it to reach split counts on both sides of
  // the one-launch (cluster) form's limit at small contexts.
  int max_splits = 0;
  // paged_attention_with_front of one query: merge the splits inside the split kernel (one thread-block
  // cluster per KV head, no combine launch) when a KV head's splits fit one cluster (<= 16). Bit-identical
  // to the two launches. The backend sets it on NVFP4 layers only: measured on the H100 (session 41,
  // docs/performance.md) NVFP4 one-token steps -0.013 ms at 8K, -0.037 at 100K; BF16 +0.035 at 1K and
  // 8K (its 21 MB QKV GEMV in front holds the SMs that a whole 9-CTA cluster must find free at once).
  bool merge_in_cluster = false;
  // Each query is its sequence's only new token (a plain decode step): no query reads a key another
  // query of the step writes. Lets the front run inside the split kernel (paged_attention_with_front).
  bool one_query_per_sequence = false;
};

// Scratch for split partial results, sized by attention_scratch_bytes.
struct AttentionScratch {
  float* data = nullptr;
  int64_t max_partials = 0;    // capacity in (query, kv head, split) records
  int64_t target_records = 0;  // split records to aim for per launch (about one wave of CTAs); 0 = 1024
};
int64_t attention_partial_floats(const AttentionShape& s);  // floats per record

// q: [NQ, n_heads, d]; sinks: [n_heads] fp32 or nullptr; out: [NQ, n_heads, d].
// Throws striker::Error for an unsupported shape or a scratch too small for NQ·n_kv_heads records.
// The split kernel is chosen by shape, all three computing the same function:
//   head_dim 128, 8 query heads per KV head (Flint), blocks >= 16 tokens: tensor cores, K and V
//     staged through a 3-stage cp.async ring per warp, 2 CTAs per SM (attention_pipe.cu);
//   the same shape with smaller blocks: tensor cores, K and V loaded into registers, 3 CTAs per SM;
//   any other shape: CUDA cores, 4 keys per lane group in flight.
// scratch.target_records is the split-record target of a 3-CTAs-per-SM kernel (one wave); the
// pipelined kernel scales it by 2/3.
// The tensor-core kernels and the combine read the step metadata (positions,
// table offsets, block ids of the first tiles, query ids, sinks) before the PDL wait: it is written
// by the step's metadata memcpy before the step's first kernel (attention_decode.cuh says why that
// is safe); q, the KV cache and the split partials are read only after the wait.
void paged_attention(const bf16* q, const bf16* k_cache, const bf16* v_cache, const float* sinks,
                     const AttentionShape& shape, const AttentionQueries& queries, const AttentionScratch& scratch,
                     bf16* out, cudaStream_t stream);

// The attention front (FLINT.md §4: q, k = per-head RMSNorm with q_norm / k_norm, RoPE on sliding
// layers; k, v into the cache) as the inputs of qk_norm_rope_kv_write (qk_rope_kv.h).
struct AttentionFront {
  const bf16* qkv = nullptr;       // [T, (n_heads + 2 n_kv) · d] = q | k | v of each token
  const float* q_norm_w = nullptr;  // [d]
  const float* k_norm_w = nullptr;  // [d]
  float eps = 0.f;
  const float* inv_freq = nullptr;  // [d/2]; nullptr on NoPE layers
  const int64_t* slots = nullptr;   // [T] cache slot of each token's k, v
};

// Decode steps of one token per sequence: the pipelined split kernel runs the front itself (each
// CTA normalises and rotates its query's 8 query heads of its KV head into shared memory; the CTA
// whose keys hold the token's position writes its k, v into the cache before reading them), so
// the step has no front launch and no q buffer: the same bits as qk_norm_rope_kv_write followed by
// paged_attention. Every tile is requested before the PDL wait, which is safe only because no
// query reads a key another query of the step writes. Needs attention_front_in_split_kernel (one
// query, or queries.one_query_per_sequence with at most 65,535 queries; no query_ids; Flint's
// head shape; blocks >= 16 tokens), throws otherwise.
bool attention_front_in_split_kernel(const AttentionShape& shape, const AttentionQueries& queries);
void paged_attention_with_front(const AttentionFront& front, bf16* k_cache, bf16* v_cache, const float* sinks,
                                const AttentionShape& shape, const AttentionQueries& queries,
                                const AttentionScratch& scratch, bf16* out, cudaStream_t stream);

// ---------------------------------------------------------------------------------------------
// Tensor-core prefill attention (attention_prefill.cu, Hopper wgmma, sm_90a): a CTA takes a tile
// of up to 16 consecutive queries of one sequence × the 8 query heads of one KV head and reads
// each K/V row of their key range once (flash-attention style), instead of once per query as
// above. Built for head_dim 128 and 8 query heads per KV head only (Flint's shape); other shapes
// throw.
//
// tiles: device array of `num_tiles` pairs {first query index, query count (1..16)}; the queries
// of a tile must be consecutive positions of one sequence (same block table), and no query may
// be in two tiles. append_prefill_tiles makes such a list on the host. query_ids lists the
// `num_queries` queries the tiles cover (what the split combine merges); nullptr means every
// query 0..NQ-1 of `queries` is in a tile. Queries outside the tiles are never written.
struct PrefillTiles {
  const int32_t* tiles = nullptr;
  int num_tiles = 0;
  const int32_t* query_ids = nullptr;
  int num_queries = 0;
};
constexpr int kPrefillTileTokens = 16;

// Appends the tiles of one run of `count` consecutive queries starting at query `first`.
void append_prefill_tiles(int first, int count, std::vector<int32_t>& tiles);

// Same arguments as paged_attention. Splits the key range of each tile across CTAs (and merges
// them with the split combine kernel) only when the tiles alone would not fill the GPU; the
// scratch then needs NQ·n_kv_heads·splits records, otherwise it is unused (may be empty).
void prefill_attention(const bf16* q, const bf16* k_cache, const bf16* v_cache, const float* sinks,
                       const AttentionShape& shape, const AttentionQueries& queries, const PrefillTiles& tiles,
                       const AttentionScratch& scratch, bf16* out, cudaStream_t stream);

// Merges `num_splits` partial records per (query, KV head) (the layout attention_partial_floats
// describes, scores in the log2 domain, records of query qi at index qi) and adds the sinks, for
// the queries query_ids[0..num_queries) (nullptr: 0..num_queries-1): the second kernel of
// paged_attention, shared with prefill_attention. head_dim 128, 8 query heads per KV head.
void attention_combine_splits(const float* partials, const float* sinks, const AttentionShape& shape,
                              int num_queries, const int32_t* query_ids, int num_splits, bf16* out,
                              cudaStream_t stream);

// CPU reference (double accumulation) over host copies of the same data.
void paged_attention_ref(const std::vector<bf16>& q, const std::vector<bf16>& k_cache,
                         const std::vector<bf16>& v_cache, const std::vector<float>* sinks,
                         const AttentionShape& shape, const std::vector<int32_t>& positions,
                         const std::vector<int32_t>& table_offset, const std::vector<int32_t>& block_tables,
                         std::vector<bf16>& out);

}  // namespace striker::cuda
