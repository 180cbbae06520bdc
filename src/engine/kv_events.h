// What the prefix cache did, for consumers outside the engine (KV-aware routers read vLLM's
// KV events: BlockStored, BlockRemoved, AllBlocksCleared). Recorded only when
// EngineConfig::enable_kv_events is set; Engine::take_kv_events() drains them in order.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/block_hash.h"

namespace striker {

// Which KV pool a block lives in: a hash is stored once per pool that holds the block's KV.
enum class KvPoolKind { Full, Sliding };

struct KvEvent {
  enum class Type { BlockStored, BlockRemoved, AllBlocksCleared };
  Type type = Type::BlockStored;
  KvPoolKind pool = KvPoolKind::Full;
  // BlockStored: consecutive blocks of one sequence, oldest first; BlockRemoved: evicted blocks.
  std::vector<BlockHash> block_hashes;
  // BlockStored: the hash of the block before the first one (none for a sequence's block 0).
  std::optional<BlockHash> parent_block_hash;
  std::vector<int32_t> token_ids;  // BlockStored: every stored block's tokens, concatenated
  int32_t block_size = 0;
};

// Append-only while enabled; the owner drains it.
struct KvEventLog {
  bool enabled = false;
  std::vector<KvEvent> events;
  void add(KvEvent e) {
    if (enabled) events.push_back(std::move(e));
  }
};

}  // namespace striker
