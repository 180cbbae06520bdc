#include "engine/grammar/grammar_automaton.h"

#include <algorithm>
#include <cstring>

namespace striker::grammar {

size_t GrammarAutomaton::KeyHash::operator()(const std::vector<int32_t>& v) const {
  uint64_t h = 1469598103934665603ull ^ v.size();
  for (int32_t x : v) {
    h ^= uint32_t(x);
    h *= 1099511628211ull;
    h ^= h >> 29;
  }
  return size_t(h);
}

GrammarAutomaton::GrammarAutomaton(const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocab,
                                   const AutomatonLimits& limits)
    : vocab_(std::move(vocab)), limits_(limits) {
  grammar.validate();
  flatten(grammar);
  // The start: a stack holding the root rule's alternatives.
  std::vector<Stack> stacks;
  for (int32_t s : alt_starts_[size_t(grammar.root())]) {
    Stack st{s};
    expand(st, stacks, 0);
  }
  initial_ = intern(stacks);
  walk_states_.resize(vocab_->max_depth() + 1);
}

void GrammarAutomaton::flatten(const Grammar& g) {
  sets_ = g.sets();
  alt_starts_.resize(g.rules().size());
  for (size_t r = 0; r < g.rules().size(); ++r) {
    for (const auto& alt : g.rules()[r].alts) {
      alt_starts_[r].push_back(int32_t(kind_.size()));
      for (const auto& e : alt) {
        kind_.push_back(e.kind == Element::Bytes ? kBytes : e.kind == Element::Token ? kToken : kRule);
        arg_.push_back(e.index);
        if (e.kind == Element::Token) {
          if (e.index < 0 || e.index >= vocab_->vocab_size())
            throw GrammarError("the grammar names token id " + std::to_string(e.index) + ", outside the vocabulary",
                               "grammar");
          grammar_tokens_.push_back(e.index);
        }
      }
      kind_.push_back(kEnd);
      arg_.push_back(0);
    }
  }
  std::sort(grammar_tokens_.begin(), grammar_tokens_.end());
  grammar_tokens_.erase(std::unique(grammar_tokens_.begin(), grammar_tokens_.end()), grammar_tokens_.end());
}

// Brings a stack to a terminal on top (or empty = accept), forking at every rule reference.
// A rule referenced last in its alternative replaces the frame (tail call), so right
// recursion (repetition) keeps stacks flat.
void GrammarAutomaton::expand(Stack& stack, std::vector<Stack>& out, size_t depth) const {
  for (;;) {
    if (stack.empty()) {
      out.push_back(stack);
      return;
    }
    const int32_t p = stack.back();
    const uint8_t k = kind_[size_t(p)];
    if (k == kBytes || k == kToken) {
      out.push_back(stack);
      return;
    }
    if (k == kEnd) {
      stack.pop_back();
      continue;
    }
    // A rule: continue after it, then push each alternative.
    if (stack.size() > limits_.max_stack_depth || depth > limits_.max_stack_depth)
      throw GrammarError("the grammar nests deeper than " + std::to_string(limits_.max_stack_depth) + " rules",
                         "size");
    if (kind_[size_t(p + 1)] == kEnd) stack.pop_back();
    else stack.back() = p + 1;
    const auto& starts = alt_starts_[size_t(arg_[size_t(p)])];
    for (size_t i = 0; i < starts.size(); ++i) {
      Stack s = stack;
      s.push_back(starts[i]);
      expand(s, out, depth + 1);
    }
    if (out.size() > limits_.max_stacks_per_state * 4)
      throw GrammarError("the grammar is too ambiguous (more than " + std::to_string(limits_.max_stacks_per_state) +
                             " parses alive at once)",
                         "size");
    return;
  }
}

int32_t GrammarAutomaton::intern(std::vector<Stack>& stacks) {
  if (stacks.empty()) return kDead;
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > limits_.max_stacks_per_state)
    throw GrammarError("the grammar is too ambiguous (more than " + std::to_string(limits_.max_stacks_per_state) +
                           " parses alive at once)",
                       "size");
  std::vector<int32_t> key;
  for (const auto& s : stacks) {
    key.push_back(int32_t(s.size()));
    key.insert(key.end(), s.begin(), s.end());
  }
  auto it = index_.find(key);
  if (it != index_.end()) return it->second;
  if (states_.size() >= limits_.max_states)
    throw GrammarError("structured output needed more than " + std::to_string(limits_.max_states) +
                           " parser states; simplify the schema or grammar",
                       "size");
  State st;
  for (const auto& s : stacks) {
    if (s.empty()) st.accept = true;
    else st.any_terminal = true;
  }
  st.key = key;
  const int32_t id = int32_t(states_.size());
  states_.push_back(std::move(st));
  index_.emplace(std::move(key), id);
  return id;
}

std::vector<GrammarAutomaton::Stack> GrammarAutomaton::stacks_of(int32_t state) const {
  std::vector<Stack> out;
  const auto& key = states_[size_t(state)].key;
  for (size_t i = 0; i < key.size();) {
    const size_t n = size_t(key[i++]);
    out.emplace_back(key.begin() + long(i), key.begin() + long(i + n));
    i += n;
  }
  return out;
}

int32_t GrammarAutomaton::step_symbol(int32_t state, int32_t symbol) {
  std::vector<Stack> next;
  for (Stack& s : stacks_of(state)) {
    if (s.empty()) continue;
    const int32_t p = s.back();
    const bool match = symbol < 256 ? kind_[size_t(p)] == kBytes && sets_[size_t(arg_[size_t(p)])].test(size_t(symbol))
                                    : kind_[size_t(p)] == kToken && arg_[size_t(p)] == symbol - 256;
    if (!match) continue;
    s.back() = p + 1;
    expand(s, next, 0);
  }
  return intern(next);
}

int32_t GrammarAutomaton::step_byte(int32_t state, uint8_t b) {
  {
    State& st = states_[size_t(state)];
    if (!st.next) {
      st.next = std::make_unique<int32_t[]>(256);
      std::fill_n(st.next.get(), 256, kUnknown);
    } else if (st.next[b] != kUnknown) {
      return st.next[b];
    }
  }
  const int32_t to = step_symbol(state, b);  // may grow states_
  states_[size_t(state)].next[b] = to;
  return to;
}

void GrammarAutomaton::compute_token_transitions(int32_t state) {
  if (states_[size_t(state)].tokens_done) return;
  std::vector<std::pair<int32_t, int32_t>> out;
  for (int32_t t : grammar_tokens_) {
    const int32_t to = step_symbol(state, 256 + t);
    if (to != kDead) out.emplace_back(t, to);
  }
  State& st = states_[size_t(state)];
  st.token_next = std::move(out);
  st.tokens_done = true;
}

int32_t GrammarAutomaton::advance(int32_t state, int32_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  if (state == kDead || token < 0 || token >= vocab_->vocab_size()) return kDead;
  if (std::binary_search(grammar_tokens_.begin(), grammar_tokens_.end(), token)) {
    compute_token_transitions(state);
    for (const auto& [t, to] : states_[size_t(state)].token_next)
      if (t == token) return to;
    return kDead;
  }
  if (!vocab_->in_trie(token)) return kDead;
  for (unsigned char c : vocab_->bytes(token)) {
    state = step_byte(state, c);
    if (state == kDead) return kDead;
  }
  return state;
}

int32_t GrammarAutomaton::advance_bytes(int32_t state, std::string_view bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  for (unsigned char c : bytes) {
    if (state == kDead) return kDead;
    state = step_byte(state, c);
  }
  return state;
}

bool GrammarAutomaton::accepts(int32_t state) {
  std::lock_guard<std::mutex> lock(mu_);
  return state != kDead && states_[size_t(state)].accept;
}

bool GrammarAutomaton::complete(int32_t state) {
  std::lock_guard<std::mutex> lock(mu_);
  return state != kDead && states_[size_t(state)].accept && !states_[size_t(state)].any_terminal;
}

void GrammarAutomaton::walk_trie(int32_t state, std::span<uint32_t> words) {
  std::fill(words.begin(), words.end(), 0u);
  const auto& n = vocab_->nodes();
  const size_t count = n.byte.size();
  walk_states_[0] = state;
  for (size_t i = 0; i < count;) {
    const int32_t from = walk_states_[n.depth[i] - 1u];
    // Fast path: the transition is already in the table.
    const State& st = states_[size_t(from)];
    int32_t to = st.next ? st.next[n.byte[i]] : kUnknown;
    if (to == kUnknown) to = step_byte(from, n.byte[i]);
    if (to == kDead) {
      i = size_t(n.subtree_end[i]);
      continue;
    }
    walk_states_[n.depth[i]] = to;
    for (int32_t k = n.first_token[i]; k < n.first_token[i + 1]; ++k) {
      const int32_t id = n.token_ids[size_t(k)];
      words[size_t(id) >> 5] |= 1u << (id & 31);
    }
    ++i;
  }
  compute_token_transitions(state);
  for (const auto& [t, to] : states_[size_t(state)].token_next) words[size_t(t) >> 5] |= 1u << (t & 31);
}

void GrammarAutomaton::store_mask(State& st, std::span<const uint32_t> words) {
  size_t allowed = 0;
  for (uint32_t w : words) allowed += size_t(__builtin_popcount(w));
  const size_t total = size_t(vocab_->vocab_size());
  const size_t sparse_limit = total / 64;  // ids are 32-bit: below this a list beats the bitset
  st.mask.clear();
  auto list = [&](bool want) {
    for (size_t w = 0; w < words.size(); ++w) {
      uint32_t bits = want ? words[w] : ~words[w];
      while (bits) {
        const size_t id = w * 32 + size_t(__builtin_ctz(bits));
        if (id < total) st.mask.push_back(uint32_t(id));
        bits &= bits - 1;
      }
    }
  };
  if (allowed <= sparse_limit) {
    st.mask_form = State::kAllowed;
    list(true);
  } else if (total - allowed <= sparse_limit) {
    st.mask_form = State::kDisallowed;
    list(false);
  } else {
    st.mask_form = State::kFull;
    st.mask.assign(words.begin(), words.end());
  }
  st.mask.shrink_to_fit();
  mask_bytes_ += st.mask.size() * 4;
}

bool GrammarAutomaton::load_mask(const State& st, std::span<uint32_t> words) const {
  switch (st.mask_form) {
    case State::kNone:
      return false;
    case State::kFull:
      std::copy(st.mask.begin(), st.mask.end(), words.begin());
      return true;
    case State::kAllowed:
      std::fill(words.begin(), words.end(), 0u);
      for (uint32_t id : st.mask) words[id >> 5] |= 1u << (id & 31);
      return true;
    case State::kDisallowed: {
      std::fill(words.begin(), words.end(), ~0u);
      const size_t total = size_t(vocab_->vocab_size());
      if (total % 32) words.back() = (1u << (total % 32)) - 1;
      for (uint32_t id : st.mask) words[id >> 5] &= ~(1u << (id & 31));
      return true;
    }
  }
  return false;
}

void GrammarAutomaton::fill_mask(int32_t state, std::span<uint32_t> words) {
  std::lock_guard<std::mutex> lock(mu_);
  if (words.size() != vocab_->words()) throw Error("grammar mask: wrong buffer size");
  if (state == kDead) {
    std::fill(words.begin(), words.end(), 0u);
    return;
  }
  if (load_mask(states_[size_t(state)], words)) {
    ++hits_;
    return;
  }
  ++misses_;
  walk_trie(state, words);
  if (mask_bytes_ < limits_.max_mask_cache_bytes) store_mask(states_[size_t(state)], words);
}

GrammarAutomaton::Stats GrammarAutomaton::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s;
  s.states = states_.size();
  for (const auto& st : states_) s.cached_masks += st.mask_form != State::kNone;
  s.mask_cache_bytes = mask_bytes_;
  s.mask_hits = hits_;
  s.mask_misses = misses_;
  return s;
}

}  // namespace striker::grammar
