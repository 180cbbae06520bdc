// KV-block bookkeeping for the two pools (full-attention and sliding layers). Integer block
// ids only: the backend owns the memory, this class decides which ids a sequence uses.
#pragma once
#include <cstdint>
#include <vector>

namespace striker {

// A free list of block ids 0..n-1. Fresh ids come out in increasing order; released ids are
// reused most-recently-released first (deterministic, so tests can assert exact ids).
class BlockPool {
 public:
  explicit BlockPool(int64_t num_blocks);
  int64_t num_total() const { return num_total_; }
  int64_t num_free() const { return int64_t(free_.size()); }
  int64_t num_used() const { return num_total_ - num_free(); }
  int32_t allocate();            // precondition: num_free() > 0
  void release(int32_t id);

 private:
  int64_t num_total_;
  std::vector<int32_t> free_;    // back() is handed out next
};

// One sequence's block tables. Both tables cover the same logical blocks (block i holds
// positions i*B .. i*B+B-1); sliding entries that fell out of every future window are -1.
struct SeqBlockTables {
  std::vector<int32_t> full;
  std::vector<int32_t> sliding;
  int64_t num_sliding_held() const;
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
  explicit KvBlockManager(const KvLayout& layout);
  const KvLayout& layout() const { return layout_; }

  // Frees sliding blocks that no query at position >= next_query_pos can see. Always safe
  // to call before scheduling a chunk that starts at next_query_pos.
  void release_out_of_window(SeqBlockTables& seq, int64_t next_query_pos);
  // The largest c <= want such that positions [start, start+c) fit in the free blocks.
  int64_t max_chunk_that_fits(const SeqBlockTables& seq, int64_t start, int64_t want) const;
  // Allocates blocks for positions up to end-1. Precondition: max_chunk_that_fits allowed it.
  void allocate_up_to(SeqBlockTables& seq, int64_t end);
  void release_all(SeqBlockTables& seq);

  const BlockPool& full_pool() const { return full_; }
  const BlockPool& sliding_pool() const { return sliding_; }

 private:
  KvLayout layout_;
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
