// Paged KV memory of the CPU backend: one pool for the full-attention layers and one for the
// sliding layers (backend.h KvCacheSpec). Each layer of a kind has its own K and V arrays
// indexed by the pool's shared block ids: [block][slot][kv_head][head_dim], BF16 bits.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "model/config.h"

namespace striker::cpu {

// Where one token of the batch sits: its absolute position and its sequence's block tables.
struct TokenSlot {
  int64_t position = 0;
  const std::vector<int32_t>* full_table = nullptr;
  const std::vector<int32_t>* sliding_table = nullptr;
};

class KvCache {
 public:
  explicit KvCache(const FlintConfig& config);

  // Bytes one block takes in each pool, summed over the layers of that kind.
  int64_t full_block_bytes(int32_t block_size) const;
  int64_t sliding_block_bytes(int32_t block_size) const;

  void allocate(const KvCacheSpec& spec);
  bool allocated() const { return block_size_ > 0; }
  int32_t block_size() const { return block_size_; }
  int64_t num_blocks(bool sliding) const { return sliding ? sliding_blocks_ : full_blocks_; }

  // Row of one token's K or V (kv_dim values) in layer `layer`, physical block, slot.
  uint16_t* key(int64_t layer, int64_t block, int64_t slot);
  uint16_t* value(int64_t layer, int64_t block, int64_t slot);

 private:
  uint16_t* row(std::vector<uint16_t>& pool, int64_t block, int64_t slot);

  int64_t kv_dim_;
  std::vector<bool> layer_is_sliding_;
  int64_t n_full_ = 0, n_sliding_ = 0;
  int32_t block_size_ = 0;
  int64_t full_blocks_ = 0, sliding_blocks_ = 0;
  std::vector<std::vector<uint16_t>> keys_, values_;  // one per layer
};

}  // namespace striker::cpu
