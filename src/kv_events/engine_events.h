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

// One WireEvent per engine event. Flint's two KV pools are vLLM's two KV-cache groups of a hybrid
// model: the full-attention pool is group 0 ("full_attention"), the sliding-window pool group 1
// ("sliding_window", `sliding_window` tokens).
std::vector<WireEvent> to_wire(const std::vector<KvEvent>& events, int32_t sliding_window);

}  // namespace striker::kv_events
