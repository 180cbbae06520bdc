#include "tokenizer/added_vocab.h"

#include <unicode/uchar.h>

#include <algorithm>

#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace striker::tok {
namespace {

// Unicode \w as the Rust regex crate defines it (what Hugging Face's single_word check uses).
bool is_word_char(uint32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  if (u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL)) return true;
  const int8_t t = u_charType(c);
  return t == U_NON_SPACING_MARK || t == U_ENCLOSING_MARK || t == U_COMBINING_SPACING_MARK ||
         t == U_DECIMAL_DIGIT_NUMBER || t == U_CONNECTOR_PUNCTUATION;
}

size_t char_start_before(std::string_view s, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t i = char_start_before(s, s.size());
  return is_word_char(utf8_next(s, i));
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  return is_word_char(utf8_next(s, i));
}

// Start of the run of whitespace that ends s (s.size() when there is none).
size_t trailing_space_start(std::string_view s) {
  size_t e = s.size();
  while (e > 0) {
    size_t b = char_start_before(s, e), i = b;
    if (!u_isUWhiteSpace(static_cast<UChar32>(utf8_next(s, i)))) break;
    e = b;
  }
  return e;
}

// Length of the run of whitespace that starts s.
size_t leading_space_len(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!u_isUWhiteSpace(static_cast<UChar32>(utf8_next(s, j)))) break;
    i = j;
  }
  return i;
}

}  // namespace

void AddedVocab::Trie::insert(std::string_view pattern, int32_t token_index) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (unsigned char b : pattern) {
    auto& ch = nodes[node].children;
    auto it = std::find_if(ch.begin(), ch.end(), [b](const auto& p) { return p.first == b; });
    if (it != ch.end()) {
      node = it->second;
    } else {
      const auto next = static_cast<int32_t>(nodes.size());
      nodes[node].children.emplace_back(b, next);
      nodes.emplace_back();
      node = next;
    }
  }
  // The first token listed wins when two have the same content.
  if (nodes[node].token_index < 0) nodes[node].token_index = token_index;
  first_byte[static_cast<unsigned char>(pattern[0])] = true;
}

std::pair<size_t, int32_t> AddedVocab::Trie::longest_at(std::string_view text, size_t pos) const {
  std::pair<size_t, int32_t> best{0, -1};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    int32_t next = -1;
    for (const auto& [c, n] : nodes[node].children)
      if (c == b) {
        next = n;
        break;
      }
    if (next < 0) break;
    node = next;
    if (nodes[node].token_index >= 0) best = {i + 1 - pos, nodes[node].token_index};
  }
  return best;
}

AddedVocab::AddedVocab(std::vector<AddedToken> tokens, const Normalizer* normalizer) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    AddedToken& t = tokens_[i];
    t.shown = t.content;
    if (t.normalized && normalizer) normalizer->normalize(t.shown);
    content_to_id_.emplace(t.content, t.id);
    id_to_index_[t.id] = i;
  }
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    if (!t.normalized) {
      raw_trie_.insert(t.content, static_cast<int32_t>(i));
    } else {
      normalized_trie_.insert(t.shown, static_cast<int32_t>(i));
    }
  }
}

void AddedVocab::split(std::string_view text, bool normalized_set, std::vector<Segment>& out) const {
  const Trie& trie = normalized_set ? normalized_trie_ : raw_trie_;
  size_t start_offset = 0;  // end of the last emitted piece
  size_t pos = 0;           // where the search continues
  while (pos < text.size()) {
    if (!trie.first_byte[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    auto [len, index] = trie.longest_at(text, pos);
    if (len == 0) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + len;
    pos = stop;  // the automaton resumes after a match even when the match is discarded below
    const AddedToken& tok = tokens_[index];
    if (tok.single_word) {
      const bool start_space = start == 0 || !ends_with_word(text.substr(0, start));
      const bool stop_space = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), start_offset);
    if (tok.rstrip) stop += leading_space_len(text.substr(stop));
    if (start_offset < start) out.push_back({std::string(text.substr(start_offset, start - start_offset)), -1});
    out.push_back({std::string(text.substr(start, stop - start)), tok.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({std::string(text.substr(start_offset)), -1});
}

const AddedToken* AddedVocab::by_id(int32_t id) const {
  auto it = id_to_index_.find(id);
  return it == id_to_index_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocab::id_of(std::string_view content) const {
  auto it = content_to_id_.find(std::string(content));
  if (it == content_to_id_.end()) return std::nullopt;
  return it->second;
}

bool AddedVocab::is_special_content(std::string_view content) const {
  auto it = content_to_id_.find(std::string(content));
  if (it == content_to_id_.end()) return false;
  const AddedToken* t = by_id(it->second);
  return t && t->special;
}

int64_t AddedVocab::max_id() const {
  int64_t m = -1;
  for (const auto& t : tokens_) m = std::max<int64_t>(m, t.id);
  return m;
}

}  // namespace striker::tok
