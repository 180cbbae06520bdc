// One KV pool's block ids 0..n-1 with reference counts and the prefix cache's index
// (vLLM's BlockPool). A block is in use while some sequence holds it (ref > 0); a free block
// may still hold the KV of a full block, named by its hash, until the pool hands it out again.
// Free blocks wait in one queue: allocation takes the front; a released block without a hash
// goes to the front (nothing to keep), one with a hash to the back, so cached blocks are
// evicted least recently used first and only when no empty block is left.
#pragma once
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/block_hash.h"
#include "engine/kv_events.h"

namespace striker {

struct BlockHashKey {
  size_t operator()(const BlockHash& h) const {
    size_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | h[size_t(i)];  // already uniformly distributed
    return v;
  }
};

class BlockPool {
 public:
  // `events` (may be null) receives BlockRemoved when a cached block is evicted.
  BlockPool(int64_t num_blocks, KvPoolKind kind = KvPoolKind::Full, KvEventLog* events = nullptr,
            int32_t block_size = 0);
  int64_t num_total() const { return int64_t(ref_.size()); }
  int64_t num_free() const { return num_free_; }  // empty or cached-but-unused
  int64_t num_used() const { return num_total() - num_free_; }
  int64_t num_cached() const { return int64_t(index_.size()); }

  // Takes the front of the free queue (precondition: num_free() > 0); a cached block loses its hash.
  int32_t allocate();
  // One more holder of a block found in the cache (it leaves the free queue if it was there).
  void touch(int32_t id);
  void release(int32_t id);

  std::optional<int32_t> lookup(const BlockHash& hash) const;
  // Names a held, fully computed block by its hash. False when another block already has the
  // hash (two sequences computed the same block): this one stays unnamed and is reused first.
  bool store(int32_t id, const BlockHash& hash);
  // Forgets every hash. Refused (false, nothing changed) while any block is in use.
  bool reset();

  int32_t ref_count(int32_t id) const { return ref_.at(size_t(id)); }
  bool has_hash(int32_t id) const { return hash_.at(size_t(id)).has_value(); }

 private:
  void check_id(int32_t id, const char* what) const;
  void unlink(int32_t id);
  void link_before(int32_t id, int32_t next);

  KvPoolKind kind_;
  KvEventLog* events_;
  int32_t block_size_;
  std::vector<int32_t> ref_;
  std::vector<std::optional<BlockHash>> hash_;
  std::unordered_map<BlockHash, int32_t, BlockHashKey> index_;
  // Free queue: a doubly linked list through prev_/next_, with sentinel n (= num_total()).
  std::vector<int32_t> prev_, next_;
  int64_t num_free_ = 0;
};

}  // namespace striker
