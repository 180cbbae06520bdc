#include "backends/cpu/kv_cache.h"

#include <string>

#include "core/error.h"

namespace striker::cpu {

KvCache::KvCache(const FlintConfig& config) : kv_dim_(config.kv_dim()) {
  for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
    const bool sliding = config.is_sliding_layer(l);
    layer_is_sliding_.push_back(sliding);
    (sliding ? n_sliding_ : n_full_) += 1;
  }
}

int64_t KvCache::full_block_bytes(int32_t block_size) const {
  return n_full_ * int64_t(block_size) * kv_dim_ * 2 /*K,V*/ * 2 /*bytes*/;
}

int64_t KvCache::sliding_block_bytes(int32_t block_size) const {
  return n_sliding_ * int64_t(block_size) * kv_dim_ * 2 * 2;
}

void KvCache::allocate(const KvCacheSpec& spec) {
  if (spec.block_size <= 0) throw Error("CPU backend: KV block_size must be positive");
  if (spec.num_full_blocks < 0 || spec.num_sliding_blocks < 0)
    throw Error("CPU backend: KV block counts must not be negative");
  block_size_ = spec.block_size;
  full_blocks_ = spec.num_full_blocks;
  sliding_blocks_ = spec.num_sliding_blocks;
  const size_t layers = layer_is_sliding_.size();
  keys_.assign(layers, {});
  values_.assign(layers, {});
  for (size_t l = 0; l < layers; ++l) {
    const int64_t blocks = layer_is_sliding_[l] ? sliding_blocks_ : full_blocks_;
    const size_t n = size_t(blocks * block_size_ * kv_dim_);
    keys_[l].assign(n, 0);
    values_[l].assign(n, 0);
  }
}

uint16_t* KvCache::row(std::vector<uint16_t>& pool, int64_t block, int64_t slot) {
  return pool.data() + (block * block_size_ + slot) * kv_dim_;
}

uint16_t* KvCache::key(int64_t layer, int64_t block, int64_t slot) {
  return row(keys_[size_t(layer)], block, slot);
}

uint16_t* KvCache::value(int64_t layer, int64_t block, int64_t slot) {
  return row(values_[size_t(layer)], block, slot);
}

}  // namespace striker::cpu
