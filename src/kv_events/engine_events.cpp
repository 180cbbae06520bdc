#include "kv_events/engine_events.h"

namespace striker::kv_events {

uint64_t external_block_hash(const BlockHash& h) {
  uint64_t v = 0;
  for (size_t i = h.size() - 8; i < h.size(); ++i) v = (v << 8) | h[i];
  return v;
}

std::vector<WireEvent> to_wire(const std::vector<KvEvent>& events, int32_t sliding_window) {
  std::vector<WireEvent> out;
  out.reserve(events.size());
  for (const auto& e : events) {
    WireEvent w;
    switch (e.type) {
      case KvEvent::Type::BlockStored: w.type = WireEvent::Type::BlockStored; break;
      case KvEvent::Type::BlockRemoved: w.type = WireEvent::Type::BlockRemoved; break;
      case KvEvent::Type::AllBlocksCleared: w.type = WireEvent::Type::AllBlocksCleared; break;
    }
    if (w.type != WireEvent::Type::AllBlocksCleared) {
      const bool sliding = e.pool == KvPoolKind::Sliding;
      w.group_idx = sliding ? 1 : 0;
      for (const auto& h : e.block_hashes) w.block_hashes.push_back(external_block_hash(h));
    }
    if (w.type == WireEvent::Type::BlockStored) {
      const bool sliding = e.pool == KvPoolKind::Sliding;
      if (e.parent_block_hash) w.parent_block_hash = external_block_hash(*e.parent_block_hash);
      w.token_ids = e.token_ids;
      w.block_size = e.block_size;
      w.kv_cache_spec_kind = sliding ? "sliding_window" : "full_attention";
      if (sliding) w.kv_cache_spec_sliding_window = sliding_window;
    }
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace striker::kv_events
