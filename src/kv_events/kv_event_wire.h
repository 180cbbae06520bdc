// vLLM's KV-cache events on the wire (vllm/distributed/kv_events.py), so KV-aware routers
// (vllm-router --policy kv_aware, llm-d's precise prefix scorer) read striker's cache as they
// read vLLM's. A batch is msgspec's encoding of KVEventBatch: EventBatch is array_like
// ([ts, events, data_parallel_rank]); each event is a map tagged by class name under "type",
// fields in declaration order, fields at their default (None) left out (omit_defaults) while the
// required ones are always present, nil when unset.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace striker::kv_events {

// One event, with vLLM's field names. Block hashes are vLLM's integer ExternalBlockHash (its
// default, VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1): opaque keys a consumer chains by parent.
struct WireEvent {
  enum class Type { BlockStored, BlockRemoved, AllBlocksCleared };
  Type type = Type::BlockStored;
  std::vector<uint64_t> block_hashes;         // BlockStored / BlockRemoved
  std::optional<uint64_t> parent_block_hash;  // BlockStored: the block before the first one
  std::vector<int32_t> token_ids;             // BlockStored: every block's tokens, concatenated
  int32_t block_size = 0;                     // BlockStored
  std::string medium = "GPU";                 // vLLM's MEDIUM_GPU: the engine's own KV pool
  // KV-cache group of a hybrid model (full attention, sliding window); unset = vLLM's None.
  std::optional<int32_t> group_idx;
  std::optional<std::string> kv_cache_spec_kind;            // BlockStored: "full_attention", ...
  std::optional<int32_t> kv_cache_spec_sliding_window;      // BlockStored, sliding groups
};

// msgpack bytes of KVEventBatch(ts, events, data_parallel_rank), as msgspec writes them.
std::string encode_event_batch(double ts, const std::vector<WireEvent>& events, int32_t data_parallel_rank);

}  // namespace striker::kv_events
