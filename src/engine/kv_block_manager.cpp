#include "engine/kv_block_manager.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/error.h"

namespace striker {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

BlockPool::BlockPool(int64_t num_blocks) : num_total_(num_blocks) {
  free_.reserve(size_t(num_blocks));
  for (int64_t id = num_blocks - 1; id >= 0; --id) free_.push_back(int32_t(id));
}

int32_t BlockPool::allocate() {
  if (free_.empty()) throw std::logic_error("BlockPool::allocate on an empty pool");
  int32_t id = free_.back();
  free_.pop_back();
  return id;
}

void BlockPool::release(int32_t id) {
  if (id < 0 || id >= num_total_) throw std::logic_error("BlockPool::release of an id outside the pool");
  free_.push_back(id);
}

int64_t SeqBlockTables::num_sliding_held() const {
  return std::count_if(sliding.begin(), sliding.end(), [](int32_t id) { return id >= 0; });
}

int64_t sliding_blocks_for_chunk(int64_t window, int32_t block_size, int64_t chunk) {
  return ceil_div(window + chunk - 1, block_size) + 1;
}

KvBlockManager::KvBlockManager(const KvLayout& layout)
    : layout_(layout), full_(layout.use_full ? layout.num_full_blocks : 0),
      sliding_(layout.use_sliding ? layout.num_sliding_blocks : 0) {}

void KvBlockManager::release_out_of_window(SeqBlockTables& seq, int64_t next_query_pos) {
  if (!layout_.use_sliding) return;
  // The oldest key any future query can see; block i is dead once its last position is older.
  const int64_t oldest_visible = next_query_pos - layout_.sliding_window + 1;
  const int64_t B = layout_.block_size;
  for (size_t i = 0; i < seq.sliding.size(); ++i) {
    if (int64_t(i + 1) * B > oldest_visible) break;
    if (seq.sliding[i] >= 0) {
      sliding_.release(seq.sliding[i]);
      seq.sliding[i] = -1;
    }
  }
}

int64_t KvBlockManager::max_chunk_that_fits(const SeqBlockTables& seq, int64_t start, int64_t want) const {
  const int64_t B = layout_.block_size;
  // Blocks the sequence may own in total after the chunk, per pool; the end position is
  // bounded by whichever pool runs out first.
  int64_t max_blocks = INT64_MAX;
  if (layout_.use_full) max_blocks = std::min(max_blocks, int64_t(seq.full.size()) + full_.num_free());
  if (layout_.use_sliding) max_blocks = std::min(max_blocks, int64_t(seq.sliding.size()) + sliding_.num_free());
  if (max_blocks == INT64_MAX) return want;
  const int64_t max_end = max_blocks * B;
  return std::clamp(max_end - start, int64_t(0), want);
}

void KvBlockManager::allocate_up_to(SeqBlockTables& seq, int64_t end) {
  const int64_t blocks = ceil_div(end, layout_.block_size);
  if (layout_.use_full) {
    if (blocks - int64_t(seq.full.size()) > full_.num_free())
      throw std::logic_error("KvBlockManager::allocate_up_to: full pool exhausted");
    while (int64_t(seq.full.size()) < blocks) seq.full.push_back(full_.allocate());
  }
  if (layout_.use_sliding) {
    if (blocks - int64_t(seq.sliding.size()) > sliding_.num_free())
      throw std::logic_error("KvBlockManager::allocate_up_to: sliding pool exhausted");
    while (int64_t(seq.sliding.size()) < blocks) seq.sliding.push_back(sliding_.allocate());
  }
}

void KvBlockManager::release_all(SeqBlockTables& seq) {
  for (int32_t id : seq.full) full_.release(id);
  for (int32_t id : seq.sliding)
    if (id >= 0) sliding_.release(id);
  seq.full.clear();
  seq.sliding.clear();
}

KvPoolPlan plan_kv_pools(const KvBudget& b) {
  if (b.block_size <= 0) throw Error("block_size must be positive, got " + std::to_string(b.block_size));
  if (b.max_model_len <= 0) throw Error("max_model_len must be positive");
  if (b.kv_cache_bytes <= 0) throw Error("the KV cache budget (kv_cache_bytes) must be positive");
  KvPoolPlan plan;
  KvLayout& L = plan.layout;
  L.block_size = b.block_size;
  L.use_full = b.full_block_bytes > 0;
  L.use_sliding = b.sliding_block_bytes > 0;
  L.sliding_window = b.sliding_window;
  if (!L.use_full && !L.use_sliding) throw Error("the backend reports zero bytes per KV block for both pools");
  if (L.use_sliding && b.sliding_window <= 0) throw Error("the model has sliding layers but sliding_window is not positive");

  const int64_t blocks_per_seq = ceil_div(b.max_model_len, b.block_size);  // full pool, one max-length sequence
  int64_t sliding_per_seq = 0;  // sliding pool, one decoding sequence
  int64_t sliding_bytes = 0;
  if (L.use_sliding) {
    sliding_per_seq = std::min(sliding_blocks_for_chunk(b.sliding_window, b.block_size, 1), blocks_per_seq);
    const int64_t chunk_need =
        std::min(sliding_blocks_for_chunk(b.sliding_window, b.block_size, b.max_num_batched_tokens), blocks_per_seq);
    const int64_t wanted = int64_t(b.max_num_seqs) * sliding_per_seq + (chunk_need - sliding_per_seq);
    const int64_t cap = L.use_full ? (b.kv_cache_bytes / 2) / b.sliding_block_bytes : b.kv_cache_bytes / b.sliding_block_bytes;
    L.num_sliding_blocks = std::min(wanted, cap);
    sliding_bytes = L.num_sliding_blocks * b.sliding_block_bytes;
    if (L.num_sliding_blocks < sliding_per_seq)
      throw Error("KV cache budget of " + std::to_string(b.kv_cache_bytes) + " bytes is too small: one sequence needs " +
                  std::to_string(sliding_per_seq) + " sliding-window blocks of " + std::to_string(b.sliding_block_bytes) +
                  " bytes");
  }
  if (L.use_full) {
    L.num_full_blocks = (b.kv_cache_bytes - sliding_bytes) / b.full_block_bytes;
    if (L.num_full_blocks < blocks_per_seq)
      throw Error("KV cache budget of " + std::to_string(b.kv_cache_bytes) + " bytes holds " +
                  std::to_string(L.num_full_blocks * b.block_size) + " tokens, fewer than max_model_len " +
                  std::to_string(b.max_model_len) + "; lower --max-model-len or raise the memory budget");
  }
  int64_t conc = INT64_MAX;
  if (L.use_full) conc = std::min(conc, L.num_full_blocks / blocks_per_seq);
  if (L.use_sliding) conc = std::min(conc, L.num_sliding_blocks / sliding_per_seq);
  plan.max_concurrency = conc;
  plan.capacity_tokens = L.use_full ? L.num_full_blocks * b.block_size : conc * b.max_model_len;
  return plan;
}

}  // namespace striker
