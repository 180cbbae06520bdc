#include "kv_events/kv_event_wire.h"

#include <msgpack.hpp>  // MSGPACK_NO_BOOST is set by CMake: only the packer is used

namespace striker::kv_events {
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

void pack_str(Packer& p, const std::string& s) {
  p.pack_str(uint32_t(s.size()));
  p.pack_str_body(s.data(), uint32_t(s.size()));
}

void pack_hashes(Packer& p, const std::vector<uint64_t>& hashes) {
  p.pack_array(uint32_t(hashes.size()));
  for (uint64_t h : hashes) p.pack_uint64(h);
}

void pack_block_stored(Packer& p, const WireEvent& e) {
  const size_t n = 8 + (e.group_idx ? 1 : 0) + (e.kv_cache_spec_kind ? 1 : 0) + (e.kv_cache_spec_sliding_window ? 1 : 0);
  p.pack_map(uint32_t(n));
  pack_str(p, "type");
  pack_str(p, "BlockStored");
  pack_str(p, "block_hashes");
  pack_hashes(p, e.block_hashes);
  pack_str(p, "parent_block_hash");
  if (e.parent_block_hash) p.pack_uint64(*e.parent_block_hash);
  else p.pack_nil();
  pack_str(p, "token_ids");
  p.pack_array(uint32_t(e.token_ids.size()));
  for (int32_t t : e.token_ids) p.pack_int32(t);
  pack_str(p, "block_size");
  p.pack_int32(e.block_size);
  pack_str(p, "lora_id");  // LoRA adapters are not served: always None
  p.pack_nil();
  pack_str(p, "medium");
  pack_str(p, e.medium);
  pack_str(p, "lora_name");
  p.pack_nil();
  // extra_keys (None: no LoRA, multimodal input or cache salt in the hash) is left out.
  if (e.group_idx) {
    pack_str(p, "group_idx");
    p.pack_int32(*e.group_idx);
  }
  if (e.kv_cache_spec_kind) {
    pack_str(p, "kv_cache_spec_kind");
    pack_str(p, *e.kv_cache_spec_kind);
  }
  if (e.kv_cache_spec_sliding_window) {
    pack_str(p, "kv_cache_spec_sliding_window");
    p.pack_int32(*e.kv_cache_spec_sliding_window);
  }
}

void pack_block_removed(Packer& p, const WireEvent& e) {
  p.pack_map(uint32_t(3 + (e.group_idx ? 1 : 0)));
  pack_str(p, "type");
  pack_str(p, "BlockRemoved");
  pack_str(p, "block_hashes");
  pack_hashes(p, e.block_hashes);
  pack_str(p, "medium");
  pack_str(p, e.medium);
  if (e.group_idx) {
    pack_str(p, "group_idx");
    p.pack_int32(*e.group_idx);
  }
}

}  // namespace

std::string encode_event_batch(double ts, const std::vector<WireEvent>& events, int32_t data_parallel_rank) {
  msgpack::sbuffer buf;
  Packer p(buf);
  p.pack_array(3);
  p.pack_double(ts);
  p.pack_array(uint32_t(events.size()));
  for (const auto& e : events) {
    switch (e.type) {
      case WireEvent::Type::BlockStored: pack_block_stored(p, e); break;
      case WireEvent::Type::BlockRemoved: pack_block_removed(p, e); break;
      case WireEvent::Type::AllBlocksCleared:
        p.pack_map(1);
        pack_str(p, "type");
        pack_str(p, "AllBlocksCleared");
        break;
    }
  }
  p.pack_int32(data_parallel_rank);
  return std::string(buf.data(), buf.size());
}

}  // namespace striker::kv_events
