#include "engine/kv_block_manager.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "core/error.h"

namespace striker {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t SeqBlockTables::num_sliding_held() const {
  return std::count_if(sliding.begin(), sliding.end(), [](int32_t id) { return id >= 0; });
}

int64_t sliding_blocks_for_chunk(int64_t window, int32_t block_size, int64_t chunk) {
  return ceil_div(window + chunk - 1, block_size) + 1;
}

KvBlockManager::KvBlockManager(const KvLayout& layout, std::unique_ptr<BlockHasher> hasher, bool record_events)
    : layout_(layout), hasher_(std::move(hasher)), events_{record_events && hasher_ != nullptr, {}},
      full_(layout.use_full ? layout.num_full_blocks : 0, KvPoolKind::Full, &events_, layout.block_size),
      sliding_(layout.use_sliding ? layout.num_sliding_blocks : 0, KvPoolKind::Sliding, &events_, layout.block_size) {}

void KvBlockManager::release_out_of_window(SeqBlockTables& seq, int64_t next_query_pos) {
  if (!layout_.use_sliding) return;
  // The oldest key any future query can see; block i is dead once its last position is older.
  const int64_t oldest_visible = next_query_pos - layout_.sliding_window + 1;
  const int64_t B = layout_.block_size;
  size_t i = std::min(seq.sliding_released, seq.sliding.size());
  for (; i < seq.sliding.size(); ++i) {
    if (int64_t(i + 1) * B > oldest_visible) break;
    if (seq.sliding[i] >= 0) {
      sliding_.release(seq.sliding[i]);
      seq.sliding[i] = -1;
    }
  }
  seq.sliding_released = i;
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
  for (auto it = seq.full.rbegin(); it != seq.full.rend(); ++it) full_.release(*it);
  for (auto it = seq.sliding.rbegin(); it != seq.sliding.rend(); ++it)
    if (*it >= 0) sliding_.release(*it);
  seq.full.clear();
  seq.sliding.clear();
  seq.sliding_released = 0;
  seq.num_cached_blocks = 0;
}

void KvBlockManager::hash_blocks(std::span<const int32_t> tokens, const ExtraKeys& extra, SeqBlockTables& seq) const {
  if (hasher_) hasher_->extend(tokens, layout_.block_size, extra, seq.hashes);
}

CacheHit KvBlockManager::find_cached_prefix(const std::vector<BlockHash>& hashes, int64_t max_tokens) const {
  CacheHit hit;
  if (!hasher_ || max_tokens <= 0) return hit;
  const int64_t B = layout_.block_size;
  int64_t blocks = std::min(max_tokens / B, int64_t(hashes.size()));
  std::vector<int32_t> full;
  if (layout_.use_full) {
    // Full attention needs every block below the hit: the run of hits from block 0.
    for (int64_t i = 0; i < blocks; ++i) {
      auto id = full_.lookup(hashes[size_t(i)]);
      if (!id) break;
      full.push_back(*id);
    }
    blocks = int64_t(full.size());
  }
  std::vector<int32_t> sliding;
  if (layout_.use_sliding) {
    // A query at a block boundary L sees the W-1 positions before it: the last ceil((W-1)/B)
    // blocks. Search from the right for such a run; a shorter run reaching block 0 also
    // serves (the window there is cut by the start of the sequence).
    const int64_t need = ceil_div(std::max<int64_t>(layout_.sliding_window - 1, 0), B);
    int64_t run = 0, end = -1;
    for (int64_t i = blocks - 1; i >= 0 && need > 0; --i) {
      if (sliding_.lookup(hashes[size_t(i)])) {
        if (++run >= need) {
          end = i + run;
          break;
        }
      } else {
        run = 0;
      }
    }
    blocks = need == 0 ? blocks : end >= 0 ? end : run;
    sliding.assign(size_t(blocks), -1);
    for (int64_t i = std::max<int64_t>(0, blocks - need); i < blocks; ++i)
      sliding[size_t(i)] = *sliding_.lookup(hashes[size_t(i)]);
  }
  full.resize(layout_.use_full ? size_t(blocks) : 0);
  hit.tokens = blocks * B;
  hit.full = std::move(full);
  hit.sliding = std::move(sliding);
  return hit;
}

void KvBlockManager::take_cached_prefix(SeqBlockTables& seq, const CacheHit& hit) {
  if (!seq.full.empty() || !seq.sliding.empty())
    throw std::logic_error("KvBlockManager::take_cached_prefix: the sequence already holds blocks");
  // Touch every hit block before anything is allocated, so no allocation can evict one.
  for (int32_t id : hit.full) full_.touch(id);
  for (int32_t id : hit.sliding)
    if (id >= 0) sliding_.touch(id);
  seq.full = hit.full;
  seq.sliding = hit.sliding;
  seq.sliding_released = 0;
  seq.num_cached_blocks = hit.tokens / layout_.block_size;
}

void KvBlockManager::store_blocks(BlockPool& pool, const std::vector<int32_t>& table, std::span<const int32_t> tokens,
                                  const SeqBlockTables& seq, int64_t first, int64_t end) {
  const int64_t B = layout_.block_size;
  KvEvent e;
  e.pool = &pool == &full_ ? KvPoolKind::Full : KvPoolKind::Sliding;
  e.block_size = int32_t(B);
  auto flush = [&] {
    if (!e.block_hashes.empty()) events_.add(std::move(e));
    e.block_hashes.clear();
    e.token_ids.clear();
  };
  for (int64_t i = first; i < end; ++i) {
    const int32_t id = table[size_t(i)];
    if (id < 0 || !pool.store(id, seq.hashes[size_t(i)])) {
      flush();  // a gap: the next stored block starts a new event with its own parent
      continue;
    }
    if (e.block_hashes.empty()) {
      e.parent_block_hash = i == 0 ? std::nullopt : std::optional<BlockHash>(seq.hashes[size_t(i - 1)]);
    }
    e.block_hashes.push_back(seq.hashes[size_t(i)]);
    e.token_ids.insert(e.token_ids.end(), tokens.begin() + i * B, tokens.begin() + (i + 1) * B);
  }
  flush();
}

void KvBlockManager::cache_computed_blocks(std::span<const int32_t> tokens, SeqBlockTables& seq, int64_t num_computed) {
  if (!hasher_) return;
  const int64_t end = num_computed / layout_.block_size;
  if (end <= seq.num_cached_blocks) return;
  if (int64_t(seq.hashes.size()) < end) throw std::logic_error("KvBlockManager::cache_computed_blocks: blocks not hashed");
  if (layout_.use_full) store_blocks(full_, seq.full, tokens, seq, seq.num_cached_blocks, end);
  if (layout_.use_sliding) store_blocks(sliding_, seq.sliding, tokens, seq, seq.num_cached_blocks, end);
  seq.num_cached_blocks = end;
}

bool KvBlockManager::reset_prefix_cache() {
  if (full_.num_used() > 0 || sliding_.num_used() > 0) return false;
  full_.reset();
  sliding_.reset();
  KvEvent e;
  e.type = KvEvent::Type::AllBlocksCleared;
  events_.add(std::move(e));
  return true;
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
