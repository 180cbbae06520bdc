// Added tokens (tokenizer.json "added_tokens"): found in the text before the model runs, with
// Hugging Face's leftmost-longest matching and its lstrip / rstrip / single_word / normalized rules.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace striker::tok {

class Normalizer;

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = true;
  // What id_to_token() and decode() show: Hugging Face gives the normalized content for
  // tokens with normalized = true (and, quirk included, then fails to skip such a special token).
  std::string shown;
};

// A piece of text: either an added token (id >= 0) or plain text for the model (id == -1).
struct Segment {
  std::string text;
  int32_t id = -1;
};

class AddedVocab {
 public:
  AddedVocab() = default;
  // `normalizer` (may be null) is applied to the content of tokens with normalized = true,
  // since those are matched against the normalized text.
  AddedVocab(std::vector<AddedToken> tokens, const Normalizer* normalizer);

  // Splits `text` at the added tokens of one matching set: the ones matched against the raw
  // text (normalized = false) or against the normalized text (normalized = true).
  void split(std::string_view text, bool normalized_set, std::vector<Segment>& out) const;

  const AddedToken* by_id(int32_t id) const;
  std::optional<int32_t> id_of(std::string_view content) const;
  bool is_special_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }
  int64_t max_id() const;

 private:
  // Byte trie for leftmost-longest search over a small set of patterns.
  struct Trie {
    struct Node {
      std::vector<std::pair<uint8_t, int32_t>> children;
      int32_t token_index = -1;  // index into tokens_ when a pattern ends here
    };
    std::vector<Node> nodes{Node{}};
    std::array<bool, 256> first_byte{};
    void insert(std::string_view pattern, int32_t token_index);
    // Longest pattern starting at text[pos]: (length, token_index), or (0, -1).
    std::pair<size_t, int32_t> longest_at(std::string_view text, size_t pos) const;
  };

  std::vector<AddedToken> tokens_;
  std::unordered_map<std::string, int32_t> content_to_id_;
  std::unordered_map<int32_t, size_t> id_to_index_;
  Trie raw_trie_, normalized_trie_;
};

}  // namespace striker::tok
