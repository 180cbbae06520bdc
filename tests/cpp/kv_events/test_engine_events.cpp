// The engine's prefix-cache events as vLLM names them: hashes in vLLM's integer form (the
// digest's low 64 bits, big-endian), the full-attention pool's events only.
#include <gtest/gtest.h>

#include "kv_events/engine_events.h"

namespace striker::kv_events {
namespace {

BlockHash hash_with_tail(uint8_t first, uint64_t tail) {
  BlockHash h{};
  h[0] = first;  // the high bytes are dropped, as vLLM's `int.from_bytes(h, "big") & (2**64 - 1)`
  for (int i = 0; i < 8; ++i) h[size_t(31 - i)] = uint8_t(tail >> (8 * i));
  return h;
}

TEST(EngineEvents, HashIsTheLowSixtyFourBitsBigEndian) {
  EXPECT_EQ(external_block_hash(hash_with_tail(0xab, 0x0102030405060708ull)), 0x0102030405060708ull);
  EXPECT_EQ(external_block_hash(hash_with_tail(0, ~uint64_t(0))), ~uint64_t(0));
}

TEST(EngineEvents, FullAttentionPoolEventsOnly) {
  KvEvent full;
  full.type = KvEvent::Type::BlockStored;
  full.block_hashes = {hash_with_tail(1, 10), hash_with_tail(1, 11)};
  full.parent_block_hash = hash_with_tail(1, 9);
  full.token_ids = std::vector<int32_t>(32, 5);
  full.block_size = 16;
  KvEvent sliding = full;
  sliding.pool = KvPoolKind::Sliding;
  KvEvent removed;
  removed.type = KvEvent::Type::BlockRemoved;
  removed.block_hashes = {hash_with_tail(2, 77)};
  KvEvent sliding_removed = removed;
  sliding_removed.pool = KvPoolKind::Sliding;
  KvEvent cleared;
  cleared.type = KvEvent::Type::AllBlocksCleared;

  const auto wire = to_wire({full, sliding, removed, sliding_removed, cleared});
  ASSERT_EQ(wire.size(), 3u);
  EXPECT_EQ(wire[0].type, WireEvent::Type::BlockStored);
  EXPECT_EQ(wire[0].block_hashes, (std::vector<uint64_t>{10, 11}));
  EXPECT_EQ(wire[0].parent_block_hash, std::optional<uint64_t>(9));
  EXPECT_EQ(wire[0].token_ids, full.token_ids);
  EXPECT_EQ(wire[0].block_size, 16);
  EXPECT_EQ(wire[0].medium, "GPU");
  EXPECT_FALSE(wire[0].group_idx);  // a single group, as vLLM with KV events on
  EXPECT_EQ(wire[1].type, WireEvent::Type::BlockRemoved);
  EXPECT_EQ(wire[1].block_hashes, (std::vector<uint64_t>{77}));
  EXPECT_EQ(wire[2].type, WireEvent::Type::AllBlocksCleared);
  EXPECT_TRUE(wire[2].block_hashes.empty());
}

}  // namespace
}  // namespace striker::kv_events
