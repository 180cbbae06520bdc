#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <queue>

#include "tokenizer/utf8.h"

namespace striker::tok {

void PairRankMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  slots_.assign(cap, Entry{});
  mask_ = cap - 1;
  size_ = 0;
}

void PairRankMap::insert_or_assign(int32_t left, int32_t right, uint32_t rank, int32_t merged) {
  if ((size_ + 1) * 2 > slots_.size()) {
    std::vector<Entry> old;
    old.swap(slots_);
    reserve(old.size());
    for (const auto& e : old)
      if (e.key != kEmpty)
        insert_or_assign(static_cast<int32_t>(e.key >> 32), static_cast<int32_t>(e.key & 0xffffffffu), e.rank,
                         e.merged);
  }
  const uint64_t key = pack(left, right);
  size_t i = hash(key) & mask_;
  while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
  if (slots_[i].key == kEmpty) ++size_;
  slots_[i] = Entry{key, rank, merged};
}

BpeModel::BpeModel(const JsonRef& model) {
  if (model.has("dropout")) {
    const JsonRef d = model.at("dropout");
    if (!d.value.is_number()) d.fail("expected a number or null");
    if (d.value.get<double>() > 0.0) d.fail("BPE dropout is not supported (it makes encoding random)");
  }
  fuse_unk_ = model.bool_or("fuse_unk", false);
  byte_fallback_ = model.bool_or("byte_fallback", false);
  ignore_merges_ = model.bool_or("ignore_merges", false);
  continuing_prefix_ = model.str_or("continuing_subword_prefix", "");
  end_suffix_ = model.str_or("end_of_word_suffix", "");

  const JsonRef vocab = model.at("vocab");
  if (!vocab.value.is_object()) vocab.fail("expected an object of token -> id");
  vocab_.reserve(vocab.value.size() * 2);
  int64_t max_id = -1;
  for (auto it = vocab.value.begin(); it != vocab.value.end(); ++it) {
    // JsonRef (which builds the path string) only on the error path: this loop runs 150k times.
    const bool ok = it.value().is_number_integer();
    const int64_t id = ok ? it.value().get<int64_t>() : -1;
    if (!ok || id < 0 || id > std::numeric_limits<int32_t>::max() / 2) {
      const JsonRef idref{it.value(), vocab.file, vocab.path + "/" + it.key()};
      idref.integer();
      idref.fail("token id out of range");
    }
    vocab_.emplace(it.key(), static_cast<int32_t>(id));
    max_id = std::max(max_id, id);
  }
  id_to_token_.resize(static_cast<size_t>(max_id + 1));
  has_id_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [tok, id] : vocab_) {
    id_to_token_[id] = tok;
    has_id_[id] = true;
  }

  small_char_id_.assign(0x800, -1);
  for (const auto& [tok, id] : vocab_) {
    if (tok.empty() || tok.size() > 2) continue;
    size_t i = 0;
    if (utf8_valid_len(tok, 0) != tok.size()) continue;
    const uint32_t cp = utf8_next(tok, i);
    if (cp < 0x800) small_char_id_[cp] = id;
  }

  if (byte_fallback_) {
    byte_fallback_ids_.assign(256, -1);
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      if (auto it = vocab_.find(name); it != vocab_.end()) byte_fallback_ids_[b] = it->second;
    }
  }

  if (model.has("unk_token")) {
    const JsonRef unk = model.at("unk_token");
    auto it = vocab_.find(unk.str());
    if (it == vocab_.end()) unk.fail("unk_token '" + unk.str() + "' is not in the vocab");
    unk_id_ = it->second;
  }

  const JsonRef merges = model.at("merges");
  const size_t n = merges.array_size();
  merges_.reserve(n);
  const size_t prefix_len = continuing_prefix_.size();
  std::string a, b, merged;
  for (size_t r = 0; r < n; ++r) {
    const Json& mv = merges.value[r];
    auto fail = [&](const std::string& what) { merges.at(r).fail(what); };
    if (mv.is_string()) {
      const std::string& s = mv.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos) fail("a merge must be two tokens separated by a space");
      a.assign(s, 0, sp);
      b.assign(s, sp + 1);
    } else if (mv.is_array() && mv.size() == 2 && mv[0].is_string() && mv[1].is_string()) {
      a = mv[0].get_ref<const std::string&>();
      b = mv[1].get_ref<const std::string&>();
    } else {
      fail("a merge must be \"a b\" or [\"a\", \"b\"]");
    }
    auto ia = vocab_.find(a), ib = vocab_.find(b);
    if (ia == vocab_.end()) fail("merge token '" + a + "' is not in the vocab");
    if (ib == vocab_.end()) fail("merge token '" + b + "' is not in the vocab");
    merged = a;
    merged.append(b, prefix_len > 0 && b.size() >= prefix_len ? prefix_len : 0);
    auto im = vocab_.find(merged);
    if (im == vocab_.end()) fail("merged token '" + merged + "' is not in the vocab");
    merges_.insert_or_assign(ia->second, ib->second, static_cast<uint32_t>(r), im->second);
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= has_id_.size() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const {
  const bool plain = continuing_prefix_.empty() && end_suffix_.empty();
  int32_t pending_unk = -1;  // an unk waiting to be emitted (fused with following unknowns)
  std::string piece;
  size_t i = 0;
  while (i < word.size()) {
    const size_t start = i;
    const uint32_t cp = utf8_next(word, i);
    int32_t id = -1;
    if (plain && cp < 0x800) {
      id = small_char_id_[cp];
    } else {
      piece.clear();
      if (start != 0) piece += continuing_prefix_;
      piece.append(word.substr(start, i - start));
      if (i == word.size()) piece += end_suffix_;
      if (auto it = vocab_.find(piece); it != vocab_.end()) id = it->second;
    }
    if (plain && cp < 0x800 && id < 0) {
      piece.assign(word.substr(start, i - start));
    }
    if (id >= 0) {
      if (pending_unk >= 0) symbols.push_back(pending_unk);
      pending_unk = -1;
      symbols.push_back(id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (unsigned char b : piece) all = all && byte_fallback_ids_[b] >= 0;
      if (all) {
        // Like Hugging Face, a pending unk is not flushed here: it lands after these bytes.
        for (unsigned char b : piece) symbols.push_back(byte_fallback_ids_[b]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !fuse_unk_) symbols.push_back(pending_unk);
      pending_unk = *unk_id_;
    }
    // No unk token: Hugging Face drops the character silently; so do we, for identical ids.
  }
  if (pending_unk >= 0) symbols.push_back(pending_unk);
}

// Few symbols: repeatedly merge the lowest-ranked adjacent pair (leftmost on ties).
void BpeModel::merge_small(std::vector<int32_t>& s) const {
  constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  if (s.size() < 2) return;
  std::vector<uint32_t> rank(s.size() - 1);
  std::vector<int32_t> merged(s.size() - 1);
  auto look = [&](size_t i) {
    const auto* e = merges_.find(s[i], s[i + 1]);
    rank[i] = e ? e->rank : kNone;
    merged[i] = e ? e->merged : -1;
  };
  for (size_t i = 0; i + 1 < s.size(); ++i) look(i);
  while (!rank.empty()) {
    size_t best = 0;
    for (size_t i = 1; i < rank.size(); ++i)
      if (rank[i] < rank[best]) best = i;
    if (rank[best] == kNone) break;
    s[best] = merged[best];
    s.erase(s.begin() + static_cast<ptrdiff_t>(best) + 1);
    rank.erase(rank.begin() + static_cast<ptrdiff_t>(best));
    merged.erase(merged.begin() + static_cast<ptrdiff_t>(best));
    if (best > 0) look(best - 1);
    if (best < rank.size()) look(best);
  }
}

// Many symbols: the same greedy order with a linked list and a heap (O(n log n)).
void BpeModel::merge_large(std::vector<int32_t>& s) const {
  struct Cand {
    uint32_t rank;
    uint32_t pos;
    int32_t merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  const size_t n = s.size();
  std::vector<int32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int32_t i) {
    if (i < 0 || next[i] < 0) return;
    if (const auto* e = merges_.find(s[i], s[next[i]]))
      heap.push(Cand{e->rank, static_cast<uint32_t>(i), e->merged});
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const int32_t i = static_cast<int32_t>(c.pos);
    if (!alive[i] || next[i] < 0) continue;
    const int32_t j = next[i];
    const auto* e = merges_.find(s[i], s[j]);
    if (!e || e->merged != c.merged) continue;  // stale entry
    s[i] = c.merged;
    alive[j] = false;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    push(prev[i]);
    push(i);
  }
  size_t w = 0;
  for (size_t i = 0; i < n; ++i)
    if (alive[i]) s[w++] = s[i];
  s.resize(w);
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto it = vocab_.find(std::string(word)); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  constexpr size_t kMaxCachedWord = 256;
  constexpr size_t kMaxCacheEntries = 200000;
  const bool cacheable = word.size() <= kMaxCachedWord;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (auto it = cache_.find(word); it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  initial_symbols(word, symbols);
  if (symbols.size() <= 128) merge_small(symbols);
  else merge_large(symbols);
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();  // bound memory on adversarial input
    cache_.emplace(std::string(word), std::move(symbols));
  }
}

}  // namespace striker::tok
