// A map of at most `capacity` entries that forgets the least recently used one when full: the
// cuBLASLt plans (gemm_lt.cu) are made per exact token count, and a long-running server meets
// every chunk length up to its token budget — an unbounded map would keep all of them.
// Host-only and not thread-safe (each LtGemm belongs to one backend's stream thread).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>

namespace striker::cuda {

template <class Key, class Value>
class LruMap {
 public:
  explicit LruMap(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // The value under `key`, made by `make()` on a miss (after evicting the least recently used
  // entry when the map is full). A reference stays valid until the next call that misses.
  template <class Make>
  Value& get_or_make(const Key& key, Make&& make) {
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      Value v = make();  // may throw: the map is left as it was
      if (entries_.size() >= capacity_) evict_oldest();
      it = entries_.emplace(key, Entry{std::move(v), 0}).first;
    }
    it->second.last_use = ++clock_;
    return it->second.value;
  }

  size_t size() const { return entries_.size(); }
  size_t capacity() const { return capacity_; }
  bool contains(const Key& key) const { return entries_.count(key) != 0; }
  void clear() { entries_.clear(); }

 private:
  struct Entry {
    Value value;
    uint64_t last_use;
  };
  void evict_oldest() {
    auto oldest = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->second.last_use < oldest->second.last_use) oldest = it;
    entries_.erase(oldest);
  }
  size_t capacity_;
  uint64_t clock_ = 0;
  std::map<Key, Entry> entries_;
};

}  // namespace striker::cuda
