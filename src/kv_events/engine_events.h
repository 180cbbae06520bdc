// The engine's prefix-cache events (engine/kv_events.h) as vLLM publishes them.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/kv_events.h"
#include "kv_events/kv_event_wire.h"

namespace striker::kv_events {

// vLLM's integer ExternalBlockHash (its default, VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1): the
// digest's low 64 bits, read big-endian.
uint64_t external_block_hash(const BlockHash& h);

// One WireEvent per event of the full-attention pool, the one a prefix is found in. The
// sliding-window pool's events are left out: vLLM turns its hybrid KV-cache manager off when KV
// events are on and publishes a single group, and KV-aware routers index that one (llm-d's relay
// drops the others).
std::vector<WireEvent> to_wire(const std::vector<KvEvent>& events);

}  // namespace striker::kv_events
