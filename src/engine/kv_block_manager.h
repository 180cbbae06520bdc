// KV-block bookkeeping for the two pools (full-attention and sliding layers). Integer block
// ids only: the backend owns the memory, this class decides which ids a sequence uses.
#pragma once
#include <cstdint>
#include <memory>
#include <utility>
#include <span>
#include <vector>

#include "engine/block_hash.h"
#include "engine/block_pool.h"
#include "engine/kv_events.h"

namespace striker {

// One sequence's block tables. Both tables cover the same logical blocks (block i holds
// positions i*B .. i*B+B-1); sliding entries that fell out of every future window are -1.
struct SeqBlockTables {
  std::vector<int32_t> full;
  std::vector<int32_t> sliding;
  // Leading sliding entries release_out_of_window has already released (all -1): each decode step
  // then looks at the few blocks that just left the window, not at the whole table (a 100K-token
  // sequence's table has 6,250 entries of 16 tokens). Reset wherever `sliding` is replaced.
  size_t sliding_released = 0;
  int64_t num_sliding_held() const;
  // Prefix caching: the chained hash of every full block of the tokens (kept when the blocks are
  // released: it depends on the tokens only), and how many leading blocks are already in the
  // cache (stored by this sequence or found there).
  std::vector<BlockHash> hashes;
  int64_t num_cached_blocks = 0;
};

// The longest prefix both pools can serve: every full-attention block below `tokens`, and
// the sliding blocks inside the window before it (the others are -1, as if released).
struct CacheHit {
  int64_t tokens = 0;
  std::vector<int32_t> full;
  std::vector<int32_t> sliding;
};

struct KvLayout {
  int32_t block_size = 16;
  int64_t num_full_blocks = 0;     // 0 with use_full = false: the model has no full layers
  int64_t num_sliding_blocks = 0;  // 0 with use_sliding = false: no sliding layers
  bool use_full = true;
  bool use_sliding = true;
  int64_t sliding_window = 0;      // W: a query at p sees keys p-W+1 .. p
};

// Most sliding blocks a chunk of `chunk` queries can need: its keys span W+chunk-1 positions.
int64_t sliding_blocks_for_chunk(int64_t window, int32_t block_size, int64_t chunk);
int64_t ceil_div(int64_t a, int64_t b);

class KvBlockManager {
 public:
  // `hasher` null: no prefix caching (blocks are never named, every prompt is computed).
  explicit KvBlockManager(const KvLayout& layout, std::unique_ptr<BlockHasher> hasher = nullptr,
                          bool record_events = false);
  // The pools point at events_: not copyable, not movable.
  KvBlockManager(const KvBlockManager&) = delete;
  KvBlockManager& operator=(const KvBlockManager&) = delete;
  const KvLayout& layout() const { return layout_; }
  bool caching() const { return hasher_ != nullptr; }

  // Frees sliding blocks that no query at position >= next_query_pos can see. Always safe
  // to call before scheduling a chunk that starts at next_query_pos.
  void release_out_of_window(SeqBlockTables& seq, int64_t next_query_pos);
  // The largest c <= want such that positions [start, start+c) fit in the free blocks.
  int64_t max_chunk_that_fits(const SeqBlockTables& seq, int64_t start, int64_t want) const;
  // Allocates blocks for positions up to end-1. Precondition: max_chunk_that_fits allowed it.
  void allocate_up_to(SeqBlockTables& seq, int64_t end);
  // Releases every block, last logical block first so that a prefix outlives its tails in the
  // cache. The hashes stay (they depend on the tokens only).
  void release_all(SeqBlockTables& seq);

  // Prefix caching (no-ops without a hasher).
  // Hashes the full blocks of `tokens` not hashed yet.
  void hash_blocks(std::span<const int32_t> tokens, const ExtraKeys& extra, SeqBlockTables& seq) const;
  // The longest cached prefix of at most max_tokens tokens (a multiple of the block size), as
  // vLLM's hybrid coordinator finds it: the full pool's run of hits from block 0 bounds the
  // sliding pool's search for the last run of ceil((W-1)/B) hits (or a run from block 0).
  CacheHit find_cached_prefix(const std::vector<BlockHash>& hashes, int64_t max_tokens) const;
  // Takes the hit's blocks (one more holder each) as the start of a sequence that holds none.
  void take_cached_prefix(SeqBlockTables& seq, const CacheHit& hit);
  // Names the blocks of positions [0, num_computed) that are full and computed, so later
  // sequences find them. `tokens` must be hashed at least that far (hash_blocks).
  void cache_computed_blocks(std::span<const int32_t> tokens, SeqBlockTables& seq, int64_t num_computed);
  // Forgets every cached block; refused (false) while any block is held by a sequence.
  bool reset_prefix_cache();
  std::vector<KvEvent> take_events() { return std::exchange(events_.events, {}); }

  const BlockPool& full_pool() const { return full_; }
  const BlockPool& sliding_pool() const { return sliding_; }

 private:
  void store_blocks(BlockPool& pool, const std::vector<int32_t>& table, std::span<const int32_t> tokens,
                    const SeqBlockTables& seq, int64_t first, int64_t end);

  KvLayout layout_;
  std::unique_ptr<BlockHasher> hasher_;
  KvEventLog events_;
  BlockPool full_;
  BlockPool sliding_;
};

// Pool sizes derived from a memory budget (EngineConfig.kv_cache_bytes).
struct KvPoolPlan {
  KvLayout layout;
  int64_t capacity_tokens = 0;   // tokens the full-attention pool holds
  int64_t max_concurrency = 0;   // max_model_len-sized sequences that fit at once
};

struct KvBudget {
  int64_t kv_cache_bytes = 0;
  int64_t full_block_bytes = 0;     // 0: the model has no full-attention layers
  int64_t sliding_block_bytes = 0;  // 0: no sliding layers
  int32_t block_size = 16;
  int64_t sliding_window = 0;
  int64_t max_model_len = 0;
  int32_t max_num_seqs = 1;
  int32_t max_num_batched_tokens = 1;
};

// The sliding pool gets enough blocks for max_num_seqs decoding sequences plus one full-size
// prefill chunk, but never more than half the budget; the full pool takes the rest. Throws
// striker::Error when the budget cannot hold even one max_model_len sequence.
KvPoolPlan plan_kv_pools(const KvBudget& budget);

}  // namespace striker
