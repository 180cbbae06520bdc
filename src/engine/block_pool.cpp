#include "engine/block_pool.h"

#include <stdexcept>
#include <string>

namespace striker {

BlockPool::BlockPool(int64_t num_blocks, KvPoolKind kind, KvEventLog* events, int32_t block_size)
    : kind_(kind), events_(events), block_size_(block_size), ref_(size_t(num_blocks), 0), hash_(size_t(num_blocks)),
      prev_(size_t(num_blocks) + 1), next_(size_t(num_blocks) + 1), num_free_(num_blocks) {
  // Fresh ids come out in increasing order: 0 is at the front.
  const int32_t s = int32_t(num_blocks);
  for (int32_t i = 0; i <= s; ++i) {
    prev_[size_t(i)] = i == 0 ? s : i - 1;
    next_[size_t(i)] = i == s ? 0 : i + 1;
  }
  if (s == 0) prev_[0] = next_[0] = 0;
}

void BlockPool::check_id(int32_t id, const char* what) const {
  if (id < 0 || id >= int32_t(ref_.size()))
    throw std::logic_error(std::string("BlockPool::") + what + " of id " + std::to_string(id) + " outside the pool");
}

void BlockPool::unlink(int32_t id) {
  next_[size_t(prev_[size_t(id)])] = next_[size_t(id)];
  prev_[size_t(next_[size_t(id)])] = prev_[size_t(id)];
  --num_free_;
}

void BlockPool::link_before(int32_t id, int32_t next) {
  const int32_t prev = prev_[size_t(next)];
  next_[size_t(prev)] = id;
  prev_[size_t(id)] = prev;
  next_[size_t(id)] = next;
  prev_[size_t(next)] = id;
  ++num_free_;
}

int32_t BlockPool::allocate() {
  if (num_free_ == 0) throw std::logic_error("BlockPool::allocate on an empty pool");
  const int32_t sentinel = int32_t(ref_.size());
  const int32_t id = next_[size_t(sentinel)];
  unlink(id);
  ref_[size_t(id)] = 1;
  if (auto& h = hash_[size_t(id)]) {  // eviction: the cached KV is about to be overwritten
    index_.erase(*h);
    KvEvent e;
    e.type = KvEvent::Type::BlockRemoved;
    e.pool = kind_;
    e.block_hashes.push_back(*h);
    e.block_size = block_size_;
    if (events_) events_->add(std::move(e));
    h.reset();
  }
  return id;
}

void BlockPool::touch(int32_t id) {
  check_id(id, "touch");
  if (ref_[size_t(id)]++ == 0) unlink(id);
}

void BlockPool::release(int32_t id) {
  check_id(id, "release");
  if (ref_[size_t(id)] <= 0) throw std::logic_error("BlockPool::release of a block nobody holds: " + std::to_string(id));
  if (--ref_[size_t(id)] > 0) return;
  const int32_t sentinel = int32_t(ref_.size());
  link_before(id, hash_[size_t(id)] ? sentinel : next_[size_t(sentinel)]);
}

std::optional<int32_t> BlockPool::lookup(const BlockHash& hash) const {
  auto it = index_.find(hash);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

bool BlockPool::store(int32_t id, const BlockHash& hash) {
  check_id(id, "store");
  if (ref_[size_t(id)] <= 0) throw std::logic_error("BlockPool::store of a free block");
  if (hash_[size_t(id)]) {
    if (*hash_[size_t(id)] != hash) throw std::logic_error("BlockPool::store: block already holds another hash");
    return false;  // already stored
  }
  if (!index_.emplace(hash, id).second) return false;
  hash_[size_t(id)] = hash;
  return true;
}

bool BlockPool::reset() {
  if (num_free_ != num_total()) return false;
  for (auto& h : hash_) h.reset();
  index_.clear();
  return true;
}

}  // namespace striker
