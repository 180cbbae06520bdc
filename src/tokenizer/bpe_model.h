// The Hugging Face BPE model: vocab + ranked merges, applied lowest rank first (leftmost on
// ties), with byte_fallback, unk_token/fuse_unk, continuing_subword_prefix, end_of_word_suffix
// and ignore_merges. Merges are looked up by the pair of symbol ids; words seen before are cached.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/json_access.h"

namespace striker::tok {

// Open-addressing map from a (left id, right id) pair to (rank, merged id).
class PairRankMap {
 public:
  struct Entry {
    uint64_t key = kEmpty;
    uint32_t rank = 0;
    int32_t merged = -1;
  };
  void reserve(size_t n);
  void insert_or_assign(int32_t left, int32_t right, uint32_t rank, int32_t merged);
  const Entry* find(int32_t left, int32_t right) const {
    const uint64_t key = pack(left, right);
    size_t i = hash(key) & mask_;
    while (true) {
      const Entry& e = slots_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
      i = (i + 1) & mask_;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t pack(int32_t a, int32_t b) {
    return (uint64_t{static_cast<uint32_t>(a)} << 32) | static_cast<uint32_t>(b);
  }
  static size_t hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return static_cast<size_t>(k);
  }
  std::vector<Entry> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

class BpeModel {
 public:
  explicit BpeModel(const JsonRef& model);

  // Appends the ids of one pre-tokenized word.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;
  int64_t max_id() const { return static_cast<int64_t>(id_to_token_.size()) - 1; }

 private:
  void initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const;
  void merge_small(std::vector<int32_t>& symbols) const;
  void merge_large(std::vector<int32_t>& symbols) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  std::vector<int32_t> small_char_id_;  // code point < 0x800 -> id, when no prefix/suffix applies
  PairRankMap merges_;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string continuing_prefix_;
  std::string end_suffix_;
  std::vector<int32_t> byte_fallback_ids_;  // <0xXX> ids, -1 where absent

  // Cache of whole words -> ids. Guarded because encode() may run on several threads.
  mutable std::mutex cache_mutex_;
  // Looked up by string_view (no key allocated on a hit).
  struct WordHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  mutable std::unordered_map<std::string, std::vector<int32_t>, WordHash, std::equal_to<>> cache_;
};

}  // namespace striker::tok
