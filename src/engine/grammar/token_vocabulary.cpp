#include "engine/grammar/token_vocabulary.h"

#include <algorithm>
#include <numeric>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace striker::grammar {
namespace {

// The bytes a byte-level BPE piece stands for ("Ġhello" -> " hello"); a byte-fallback piece
// "<0xAB>" is that byte. False when the piece has a character outside the byte-level table.
bool piece_bytes(const std::string& piece, std::string& out) {
  out.clear();
  if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece.back() == '>') {
    out.push_back(char(std::stoi(piece.substr(3, 2), nullptr, 16)));
    return true;
  }
  const auto& table = tok::byte_level_table();
  size_t i = 0;
  while (i < piece.size()) {
    if (tok::utf8_valid_len(piece, i) == 0) return false;
    const int b = table.byte_of(tok::utf8_next(piece, i));
    if (b < 0) return false;
    out.push_back(char(b));
  }
  return !out.empty();
}

}  // namespace

TokenVocabulary::TokenVocabulary(const Tokenizer& tokenizer, int64_t vocab_size) : vocab_size_(vocab_size) {
  bytes_.resize(size_t(vocab_size));
  in_trie_.assign(size_t(vocab_size), 0);
  std::vector<int32_t> ids;
  const int64_t known = std::min<int64_t>(vocab_size, tokenizer.vocab_size());
  for (int32_t id = 0; id < known; ++id) {
    auto piece = tokenizer.id_to_token(id);
    if (!piece) continue;
    if (tokenizer.is_added(id)) {
      bytes_[size_t(id)] = *piece;  // shown text; matched only as a whole token
      continue;
    }
    if (piece_bytes(*piece, bytes_[size_t(id)])) ids.push_back(id);
  }
  build(ids);
}

TokenVocabulary::TokenVocabulary(const std::vector<std::string>& tokens, const std::vector<int32_t>& added)
    : vocab_size_(int64_t(tokens.size())), bytes_(tokens), in_trie_(tokens.size(), 0) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < int32_t(tokens.size()); ++id)
    if (!tokens[size_t(id)].empty() && std::find(added.begin(), added.end(), id) == added.end()) ids.push_back(id);
  build(ids);
}

void TokenVocabulary::build(const std::vector<int32_t>& ids_in) {
  std::vector<int32_t> ids = ids_in;
  for (int32_t id : ids) in_trie_[size_t(id)] = 1;
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return bytes_[size_t(a)] != bytes_[size_t(b)] ? bytes_[size_t(a)] < bytes_[size_t(b)] : a < b;
  });
  // Sorted strings give the depth-first order directly: a token adds nodes for the bytes past
  // its common prefix with the previous token; open nodes deeper than that prefix are closed.
  Nodes& n = nodes_;
  std::vector<int32_t> open;  // node index per depth - 1
  const std::string* prev = nullptr;
  auto close_to = [&](size_t depth) {
    while (open.size() > depth) {
      n.subtree_end[size_t(open.back())] = int32_t(n.byte.size());
      open.pop_back();
    }
  };
  std::vector<std::vector<int32_t>> tokens_at;
  for (int32_t id : ids) {
    const std::string& s = bytes_[size_t(id)];
    size_t common = 0;
    if (prev) {
      const size_t lim = std::min(prev->size(), s.size());
      while (common < lim && (*prev)[common] == s[common]) ++common;
    }
    close_to(common);
    for (size_t d = common; d < s.size(); ++d) {
      open.push_back(int32_t(n.byte.size()));
      n.byte.push_back(uint8_t(s[d]));
      n.depth.push_back(uint16_t(std::min<size_t>(d + 1, 65535)));
      n.subtree_end.push_back(0);
      tokens_at.emplace_back();
    }
    tokens_at[size_t(open.back())].push_back(id);
    max_depth_ = std::max(max_depth_, s.size());
    prev = &s;
  }
  close_to(0);
  n.first_token.assign(n.byte.size() + 1, 0);
  for (size_t i = 0; i < n.byte.size(); ++i) {
    n.first_token[i] = int32_t(n.token_ids.size());
    n.token_ids.insert(n.token_ids.end(), tokens_at[i].begin(), tokens_at[i].end());
  }
  n.first_token[n.byte.size()] = int32_t(n.token_ids.size());
  // Deepest descendant, children first (a child comes after its parent in depth-first order).
  n.deepest.assign(n.depth.begin(), n.depth.end());
  for (size_t i = n.byte.size(); i-- > 0;)
    for (size_t c = i + 1; c < size_t(n.subtree_end[i]); c = size_t(n.subtree_end[c]))
      n.deepest[i] = std::max(n.deepest[i], n.deepest[c]);
  // Cumulative masks by token length.
  const size_t w = words();
  short_tokens_.assign((max_depth_ + 1) * w, 0u);
  for (int32_t id : ids) {
    const size_t len = std::min(bytes_[size_t(id)].size(), max_depth_);
    short_tokens_[len * w + size_t(id >> 5)] |= 1u << (id & 31);
  }
  for (size_t len = 1; len <= max_depth_; ++len)
    for (size_t k = 0; k < w; ++k) short_tokens_[len * w + k] |= short_tokens_[(len - 1) * w + k];
}

}  // namespace striker::grammar
