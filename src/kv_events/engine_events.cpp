#include "kv_events/engine_events.h"

namespace striker::kv_events {

uint64_t external_block_hash(const BlockHash& h) {
  uint64_t v = 0;
  for (size_t i = h.size() - 8; i < h.size(); ++i) v = (v << 8) | h[i];
  return v;
}

std::vector<WireEvent> to_wire(const std::vector<KvEvent>& events) {
  std::vector<WireEvent> out;
  out.reserve(events.size());
  for (const auto& e : events) {
    if (e.pool == KvPoolKind::Sliding) continue;
    WireEvent w;
    switch (e.type) {
      case KvEvent::Type::BlockStored: w.type = WireEvent::Type::BlockStored; break;
      case KvEvent::Type::BlockRemoved: w.type = WireEvent::Type::BlockRemoved; break;
      case KvEvent::Type::AllBlocksCleared: w.type = WireEvent::Type::AllBlocksCleared; break;
    }
    for (const auto& h : e.block_hashes) w.block_hashes.push_back(external_block_hash(h));
    if (e.parent_block_hash) w.parent_block_hash = external_block_hash(*e.parent_block_hash);
    w.token_ids = e.token_ids;
    w.block_size = e.block_size;
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace striker::kv_events
