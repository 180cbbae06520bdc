#include "tokenizer/segment_cache.h"

#include <functional>

namespace striker::tok {

size_t SegmentCache::key_of(std::string_view text, bool at_text_start) {
  return std::hash<std::string_view>{}(text) ^ (at_text_start ? 0x9e3779b97f4a7c15ull : 0);
}

SegmentCache::Lru::iterator SegmentCache::find_locked(std::string_view text, bool at_text_start, size_t key) const {
  auto [lo, hi] = index_.equal_range(key);
  for (auto it = lo; it != hi; ++it) {
    const Entry& e = *it->second;
    if (e.at_text_start == at_text_start && e.text == text) return it->second;
  }
  return lru_.end();
}

bool SegmentCache::append(std::string_view text, bool at_text_start, std::vector<int32_t>& out) const {
  const size_t key = key_of(text, at_text_start);
  std::lock_guard lock(mu_);
  auto it = find_locked(text, at_text_start, key);
  if (it == lru_.end()) return false;
  lru_.splice(lru_.begin(), lru_, it);  // iterators stay valid
  out.insert(out.end(), it->ids.begin(), it->ids.end());
  return true;
}

void SegmentCache::put(std::string_view text, bool at_text_start, std::span<const int32_t> ids) const {
  if (text.size() + ids.size() * sizeof(int32_t) > budget_) return;
  const size_t key = key_of(text, at_text_start);
  Entry e{key, std::string(text), at_text_start, std::vector<int32_t>(ids.begin(), ids.end())};
  std::lock_guard lock(mu_);
  if (find_locked(text, at_text_start, key) != lru_.end()) return;  // another thread was first
  bytes_ += e.bytes();
  lru_.push_front(std::move(e));
  index_.emplace(key, lru_.begin());
  while (bytes_ > budget_) {
    auto last = std::prev(lru_.end());
    auto [lo, hi] = index_.equal_range(last->key);
    for (auto it = lo; it != hi; ++it)
      if (it->second == last) {
        index_.erase(it);
        break;
      }
    bytes_ -= last->bytes();
    lru_.erase(last);
  }
}

size_t SegmentCache::entries() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

size_t SegmentCache::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

}  // namespace striker::tok
