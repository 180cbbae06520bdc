// The KV event batch bytes against msgspec's: the golden hex below is what vLLM's own structs
// (vllm/distributed/kv_events.py: EventBatch array_like, events tagged maps with omit_defaults)
// encode for the same batch with msgspec 0.22 (tests/python/test_kv_events_wire.py re-derives it).
#include <gtest/gtest.h>

#include <string>

#include "kv_events/kv_event_wire.h"

namespace striker::kv_events {
namespace {

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

WireEvent stored(std::vector<uint64_t> hashes, std::optional<uint64_t> parent, std::vector<int32_t> tokens) {
  WireEvent e;
  e.type = WireEvent::Type::BlockStored;
  e.block_hashes = std::move(hashes);
  e.parent_block_hash = parent;
  e.token_ids = std::move(tokens);
  e.block_size = 16;
  return e;
}

TEST(KvEventWire, BatchMatchesMsgspecEncodingOfVllmStructs) {
  std::vector<int32_t> first(48);
  for (int i = 0; i < 48; ++i) first[size_t(i)] = i;
  WireEvent second = stored({70000}, 300, std::vector<int32_t>(16, 151329));
  second.group_idx = 0;
  second.kv_cache_spec_kind = "full_attention";
  WireEvent removed;
  removed.type = WireEvent::Type::BlockRemoved;
  removed.block_hashes = {7, uint64_t(1) << 40};
  WireEvent cleared;
  cleared.type = WireEvent::Type::AllBlocksCleared;
  const std::vector<WireEvent> events = {stored({~uint64_t(0), 7, 300}, std::nullopt, first), second, removed, cleared};
  EXPECT_EQ(hex(encode_event_batch(1700000000.25, events, 0)),
            "93cb41d954fc401000009488a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657393cfffffffffffffffff07cd012cb1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f696473dc0030000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2faa626c6f636b5f73697a6510a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c08aa474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391ce00011170b1706172656e745f626c6f636b5f68617368cd012ca9746f6b656e5f696473dc0010ce00024f21ce00024f21ce00024f21ce00024f21ce00024f21ce00024f21ce00024f21ce00024f21ce00024f21ce00024f21ce00024f21ce00024f21ce00024f21ce00024f21ce00024f21ce00024f21aa626c6f636b5f73697a6510a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e83a474797065ac426c6f636b52656d6f766564ac626c6f636b5f6861736865739207cf0000010000000000a66d656469756da347505581a474797065b0416c6c426c6f636b73436c656172656400");
}

TEST(KvEventWire, EmptyBatchIsAThreeElementArray) {
  // [ts, [], rank]: 0x93, float64, empty array, positive fixint.
  EXPECT_EQ(hex(encode_event_batch(1.5, {}, 2)), "93cb3ff800000000000090" "02");
}

}  // namespace
}  // namespace striker::kv_events
