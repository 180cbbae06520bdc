// The model's vocabulary as the grammar matcher sees it: each ordinary token's exact bytes,
// laid out as a byte trie in depth-first order so a token mask is one pass over an array that
// skips every subtree whose prefix the grammar rejects. Built once per server from the
// tokenizer. Added tokens (<|user|>, <tool_call>, ...) are not in the trie: inside a
// constrained region they are allowed only where a grammar names them as whole tokens.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace striker {
class Tokenizer;
}

namespace striker::grammar {

class TokenVocabulary {
 public:
  // `vocab_size` is the model's (logits width); ids the tokenizer does not know are never allowed.
  TokenVocabulary(const Tokenizer& tokenizer, int64_t vocab_size);
  // For tests: token i has bytes tokens[i]; ids listed in `added` are whole-token only.
  TokenVocabulary(const std::vector<std::string>& tokens, const std::vector<int32_t>& added);

  int64_t vocab_size() const { return vocab_size_; }
  size_t words() const { return size_t((vocab_size_ + 31) / 32); }  // uint32 words of a mask
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
  bool in_trie(int32_t id) const { return in_trie_[size_t(id)] != 0; }

  // Trie nodes in depth-first order; node i's subtree is [i, subtree_end[i]).
  struct Nodes {
    std::vector<uint8_t> byte;
    std::vector<uint16_t> depth;  // 1 for the root's children
    std::vector<int32_t> subtree_end;
    std::vector<int32_t> first_token;  // into token_ids; tokens ending at node i: [first_token[i], first_token[i+1])
    std::vector<int32_t> token_ids;
    std::vector<uint16_t> deepest;  // the largest depth in node i's subtree
  };
  const Nodes& nodes() const { return nodes_; }
  size_t max_depth() const { return max_depth_; }
  // The trie's tokens of at most `len` bytes as a mask (words() long); len >= max_depth(): all.
  const uint32_t* tokens_up_to(size_t len) const {
    return short_tokens_.data() + std::min(len, max_depth_) * words();
  }

 private:
  void build(const std::vector<int32_t>& ids_in_trie);
  int64_t vocab_size_ = 0;
  std::vector<std::string> bytes_;
  std::vector<uint8_t> in_trie_;
  Nodes nodes_;
  size_t max_depth_ = 0;
  std::vector<uint32_t> short_tokens_;  // (max_depth + 1) masks: tokens_up_to(len) for each len
};

}  // namespace striker::grammar
