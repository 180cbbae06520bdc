// Token ids of long text segments seen recently, so a conversation resent turn after turn (agents,
// multi-turn chats) is not tokenized again: a 32K-token history costs ~14 ms to encode on the
// H200 host, more than the turn's own prefill of its new tokens saves over the prefix cache.
//
// A segment is a stretch of text between added tokens, after normalization: its ids are a pure
// function of (text, at_text_start), so a hit returns exactly what encoding would. Only segments of
// at least kMinBytes are kept (short ones encode in microseconds); the least recently used go first
// once the cached text and ids exceed the byte budget. Safe to use from several threads.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace striker::tok {

class SegmentCache {
 public:
  static constexpr size_t kMinBytes = 4096;

  explicit SegmentCache(size_t budget_bytes = size_t(64) << 20) : budget_(budget_bytes) {}

  static bool worth_caching(std::string_view text) { return text.size() >= kMinBytes; }

  // Appends the cached ids of the segment to `out` and returns true, or returns false.
  bool append(std::string_view text, bool at_text_start, std::vector<int32_t>& out) const;
  void put(std::string_view text, bool at_text_start, std::span<const int32_t> ids) const;

  size_t entries() const;
  size_t bytes() const;

 private:
  struct Entry {
    size_t key;  // key_of(text, at_text_start), kept for eviction
    std::string text;
    bool at_text_start;
    std::vector<int32_t> ids;
    size_t bytes() const { return text.size() + ids.size() * sizeof(int32_t); }
  };
  using Lru = std::list<Entry>;  // front = most recently used

  static size_t key_of(std::string_view text, bool at_text_start);
  Lru::iterator find_locked(std::string_view text, bool at_text_start, size_t key) const;

  size_t budget_;
  mutable std::mutex mu_;
  mutable Lru lru_;
  mutable std::unordered_multimap<size_t, Lru::iterator> index_;
  mutable size_t bytes_ = 0;
};

}  // namespace striker::tok
