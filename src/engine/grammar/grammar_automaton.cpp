#include "engine/grammar/grammar_automaton.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>

namespace striker::grammar {
namespace {

// Set bits of a mask. Without -mpopcnt, __builtin_popcount is a libgcc call per word; every
// x86-64 server CPU has the instruction, so this loop asks for it (elsewhere the builtin is native).
#if defined(__x86_64__)
__attribute__((target("popcnt")))
#endif
size_t count_bits(std::span<const uint32_t> words) {
  size_t n = 0;
  for (uint32_t w : words) n += size_t(__builtin_popcount(w));
  return n;
}

}  // namespace

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
  scratch_.resize(vocab_->words());
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
  // Counted positions of non-empty elements (an element that may match nothing could fit
  // any number of copies in one byte, so its copies do not agree).
  const std::vector<char> nullable = g.nullable();
  for (const CountedPosition& c : g.counted_positions()) {
    if (c.element.kind == Element::Rule && nullable[size_t(c.element.index)]) continue;
    const int32_t at = alt_starts_[size_t(c.rule)][size_t(c.alt)] + c.pos;
    const int32_t ref = alt_starts_[size_t(c.ref_rule)][size_t(c.ref_alt)] + c.ref_pos;
    if (at != ref) counted_[at] = {ref, c.agree};
  }
  // precompute() walks the copies of a long repetition from the first one whose top agrees with
  // its reference on every token (longer ones alias that top, see top_mask_of) down to the last.
  const int64_t all = int64_t(vocab_->max_depth()) + 1;
  std::unordered_map<int32_t, int32_t> first_full;  // reference -> its copy with agree == all
  for (const auto& [at, c] : counted_)
    if (c.agree == all) first_full[c.ref] = at;
  for (const auto& [at, c] : counted_)
    if (c.agree > all && first_full.count(c.ref)) precompute_skip_[at] = first_full[c.ref];
  for (const auto& [ref, at] : first_full) precompute_skip_[ref] = at;
  bottom_pos_ = int32_t(kind_.size());
  kind_.push_back(kBottom);
  arg_.push_back(0);
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
    if (k == kBytes || k == kToken || k == kBottom) {
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
    else if (kind_[size_t(s.back())] == kBottom) st.bottom = true;
    else st.any_terminal = true;
    if (!s.empty() && kind_[size_t(s.back())] == kBytes) st.first |= sets_[size_t(arg_[size_t(s.back())])];
  }
  st.key = key;
  const int32_t id = int32_t(states_.size());
  states_.push_back(std::move(st));
  next_.push_back(nullptr);
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
  const std::vector<int32_t>& key = states_[size_t(state)].key;
  // Only stacks whose top takes the symbol are copied out of the serialised key.
  for (size_t i = 0; i < key.size();) {
    const size_t n = size_t(key[i++]);
    const size_t top = i + n - 1;
    i += n;
    if (n == 0) continue;
    const int32_t p = key[top];
    const bool match = symbol < 256 ? kind_[size_t(p)] == kBytes && sets_[size_t(arg_[size_t(p)])].test(size_t(symbol))
                                    : kind_[size_t(p)] == kToken && arg_[size_t(p)] == symbol - 256;
    if (!match) continue;
    Stack s(key.begin() + long(top + 1 - n), key.begin() + long(top + 1));
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
      next_[size_t(state)] = st.next.get();
    } else if (st.next[b] != kUnknown) {
      return st.next[b];
    }
    if (!st.first.test(b)) return st.next[b] = kDead;  // most bytes of a structural state
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

void GrammarAutomaton::walk_nodes(int32_t state, size_t begin, size_t end, std::span<uint32_t> words,
                                  std::vector<int32_t>* uncertain, size_t shallow) {
  const auto& n = vocab_->nodes();
  if (begin >= end) return;
  walk_states_[n.depth[begin] - 1u] = state;
  for (size_t i = begin; i < end;) {
    if (n.deepest[i] <= shallow) {
      i = size_t(n.subtree_end[i]);
      continue;
    }
    const uint16_t d = n.depth[i];
    const int32_t from = walk_states_[d - 1u];
    const int32_t* table = next_[size_t(from)];
    int32_t to = table ? table[n.byte[i]] : kUnknown;
    if (to == kUnknown) to = step_byte(from, n.byte[i]);
    if (to == kDead) {
      i = size_t(n.subtree_end[i]);
      continue;
    }
    walk_states_[d] = to;
    for (int32_t k = n.first_token[i]; k < n.first_token[i + 1]; ++k) {
      const int32_t id = n.token_ids[size_t(k)];
      words[size_t(id) >> 5] |= 1u << (id & 31);
    }
    if (uncertain && d > shallow && states_[size_t(to)].bottom && size_t(n.subtree_end[i]) > i + 1)
      uncertain->push_back(int32_t(i));
    ++i;
  }
}

const GrammarAutomaton::TopMask& GrammarAutomaton::top_mask(const Stack& stack) {
  Stack top{bottom_pos_};
  top.insert(top.end(), stack.end() - long(std::min(stack.size(), kTopFrames)), stack.end());
  return top_mask_of(top);
}

const GrammarAutomaton::TopMask& GrammarAutomaton::top_mask_of(const Stack& top) {
  std::vector<Stack> one{top};
  const int32_t t = intern(one);
  if (auto it = top_masks_.find(t); it != top_masks_.end()) return *it->second;
  // A top inside counted copies: the same top at the chain's reference, and how far they agree.
  Stack ref = top;
  int64_t agree = -1;
  for (size_t i = 1; i < ref.size(); ++i)
    if (auto c = counted_.find(ref[i]); c != counted_.end()) {
      ref[i] = c->second.ref;
      agree = agree < 0 ? c->second.agree : std::min(agree, c->second.agree);
    }
  const auto& n = vocab_->nodes();
  std::vector<uint32_t> words(vocab_->words(), 0u);
  auto m = std::make_shared<TopMask>();
  if (agree >= 1) {
    const TopMask& r = top_mask_of(ref);
    const size_t shallow = size_t(agree);
    if (shallow >= vocab_->max_depth()) {  // every token agrees: the reference's walk is this one's
      auto alias = top_masks_.at(intern(one = {ref}));
      return *top_masks_.emplace(t, std::move(alias)).first->second;
    }
    // Tokens of up to `shallow` bytes (and the subtrees they lead into) as the reference found
    // them (kept as a reference, not copied); the deeper subtrees walked from this top.
    m->base = &r;
    m->base_len = shallow;
    for (int32_t u : r.uncertain)
      if (n.depth[size_t(u)] <= shallow) m->uncertain.push_back(u);
    walk_nodes(t, 0, n.byte.size(), words, &m->uncertain, shallow);
    ++shared_walks_;
  } else {
    walk_nodes(t, 0, n.byte.size(), words, &m->uncertain);
    ++top_walks_;
  }
  store_mask(m->viable, words);
  m->id = t;
  mask_bytes_ += m->uncertain.size() * 4;
  return *top_masks_.emplace(t, std::move(m)).first->second;
}

int32_t GrammarAutomaton::rest_state(const Stack& stack) {
  if (stack.size() <= kTopFrames) return kDead;
  Stack rest(stack.begin(), stack.end() - long(kTopFrames));
  if (auto it = rest_states_.find(rest); it != rest_states_.end()) return it->second;
  // The top's last frame ended: the rest resumes where the automaton would (after a rule
  // reference, or at the end of an alternative).
  std::vector<Stack> stacks;
  Stack s = rest;
  expand(s, stacks, 0);
  const int32_t id = intern(stacks);
  rest_states_.emplace(std::move(rest), id);
  return id;
}

const GrammarAutomaton::CompactMask& GrammarAutomaton::finish_mask(const TopMask& top, int32_t rest) {
  const uint64_t key = uint64_t(uint32_t(top.id)) << 32 | uint32_t(rest);
  if (auto it = finish_masks_.find(key); it != finish_masks_.end()) return it->second;
  CompactMask m;
  m.form = CompactMask::kAllowed;
  // The rest picks up after the node where the top's frames ran out: its subtree's bytes. The
  // subtrees are small: their tokens are listed (and the scratch mask cleared) directly.
  const auto& n = vocab_->nodes();
  std::span<uint32_t> words(scratch_);
  auto collect = [&](size_t begin, size_t end) {
    for (int32_t k = n.first_token[begin]; k < n.first_token[end]; ++k) {
      const int32_t id = n.token_ids[size_t(k)];
      uint32_t& w = words[size_t(id) >> 5];
      if ((w >> (id & 31)) & 1) {
        m.data.push_back(uint32_t(id));
        w &= ~(1u << (id & 31));
      }
    }
  };
  if (rest != kDead)
    for (int32_t u : top.uncertain) {
      const size_t begin = size_t(u) + 1, end = size_t(n.subtree_end[size_t(u)]);
      try {
        walk_nodes(rest, begin, end, words, nullptr);
      } catch (...) {  // a state limit: leave the scratch mask clean for the next caller
        collect(begin, end);
        throw;
      }
      collect(begin, end);
    }
  m.data.shrink_to_fit();
  mask_bytes_ += m.data.size() * 4 + 32;
  return finish_masks_.emplace(key, std::move(m)).first->second;
}

void GrammarAutomaton::add_stack_mask(const Stack& stack, std::span<uint32_t> words) {
  const TopMask& top = top_mask(stack);
  if (top.base) or_mask(top.base->viable, words, vocab_->tokens_up_to(top.base_len));
  or_mask(top.viable, words);
  if (!top.uncertain.empty()) or_mask(finish_mask(top, rest_state(stack)), words);
}

void GrammarAutomaton::compute_mask(int32_t state, std::span<uint32_t> words) {
  std::fill(words.begin(), words.end(), 0u);
  for (const Stack& st : stacks_of(state))
    if (!st.empty()) add_stack_mask(st, words);  // empty: the input may end here (stop tokens)
  compute_token_transitions(state);
  for (const auto& [t, to] : states_[size_t(state)].token_next) words[size_t(t) >> 5] |= 1u << (t & 31);
}

void GrammarAutomaton::store_mask(CompactMask& m, std::span<const uint32_t> words) {
  const size_t allowed = count_bits(words);
  const size_t total = size_t(vocab_->vocab_size());
  const size_t sparse_limit = total / 64;  // ids are 32-bit: below this a list beats the bitset
  m.data.clear();
  auto list = [&](bool want) {
    for (size_t w = 0; w < words.size(); ++w) {
      uint32_t bits = want ? words[w] : ~words[w];
      while (bits) {
        const size_t id = w * 32 + size_t(__builtin_ctz(bits));
        if (id < total) m.data.push_back(uint32_t(id));
        bits &= bits - 1;
      }
    }
  };
  if (allowed <= sparse_limit) {
    m.form = CompactMask::kAllowed;
    list(true);
  } else if (total - allowed <= sparse_limit) {
    m.form = CompactMask::kDisallowed;
    list(false);
  } else {
    m.form = CompactMask::kFull;
    m.data.assign(words.begin(), words.end());
  }
  m.data.shrink_to_fit();
  mask_bytes_ += m.data.size() * 4;
}

bool GrammarAutomaton::load_mask(const CompactMask& m, std::span<uint32_t> words) const {
  if (m.form == CompactMask::kNone) return false;
  std::fill(words.begin(), words.end(), 0u);
  or_mask(m, words);
  return true;
}

void GrammarAutomaton::or_mask(const CompactMask& m, std::span<uint32_t> words, const uint32_t* only) const {
  auto in = [&](uint32_t id) { return !only || ((only[id >> 5] >> (id & 31)) & 1); };
  switch (m.form) {
    case CompactMask::kNone:
      return;
    case CompactMask::kFull:
      if (only)
        for (size_t w = 0; w < words.size(); ++w) words[w] |= m.data[w] & only[w];
      else
        for (size_t w = 0; w < words.size(); ++w) words[w] |= m.data[w];
      return;
    case CompactMask::kAllowed:
      for (uint32_t id : m.data)
        if (in(id)) words[id >> 5] |= 1u << (id & 31);
      return;
    case CompactMask::kDisallowed: {
      // words |= everything (in `only`) but the listed ids: keep the listed ids' current bits.
      std::vector<uint32_t> keep;
      for (uint32_t id : m.data)
        if ((words[id >> 5] >> (id & 31)) & 1) keep.push_back(id);
      if (only) {
        for (size_t w = 0; w < words.size(); ++w) words[w] |= only[w];
      } else {
        std::fill(words.begin(), words.end(), ~0u);
        const size_t total = size_t(vocab_->vocab_size());
        if (total % 32) words.back() = (1u << (total % 32)) - 1;
      }
      for (uint32_t id : m.data) words[id >> 5] &= ~(1u << (id & 31));
      for (uint32_t id : keep) words[id >> 5] |= 1u << (id & 31);
      return;
    }
  }
}

void GrammarAutomaton::fill_mask(int32_t state, std::span<uint32_t> words) {
  std::lock_guard<std::mutex> lock(mu_);
  if (words.size() != vocab_->words()) throw Error("grammar mask: wrong buffer size");
  if (state == kDead) {
    std::fill(words.begin(), words.end(), 0u);
    return;
  }
  if (load_mask(states_[size_t(state)].mask, words)) {
    ++hits_;
    return;
  }
  ++misses_;
  compute_mask(state, words);
  if (mask_bytes_ < limits_.max_mask_cache_bytes) store_mask(states_[size_t(state)].mask, words);
}

void GrammarAutomaton::fill_mask_exact(int32_t state, std::span<uint32_t> words) {
  std::lock_guard<std::mutex> lock(mu_);
  if (words.size() != vocab_->words()) throw Error("grammar mask: wrong buffer size");
  std::fill(words.begin(), words.end(), 0u);
  if (state == kDead) return;
  walk_nodes(state, 0, vocab_->nodes().byte.size(), words, nullptr);
  compute_token_transitions(state);
  for (const auto& [t, to] : states_[size_t(state)].token_next) words[size_t(t) >> 5] |= 1u << (t & 31);
}

bool GrammarAutomaton::precompute() {
  std::lock_guard<std::mutex> lock(mu_);
  const double deadline = thread_cpu_ms() + limits_.precompute_ms;
  // Every stack evolves on its own (a state is a set of them), and what follows a stack's
  // terminal does not depend on which byte matched it: one expansion per stack finds them all.
  std::unordered_set<Stack, KeyHash> seen;
  std::vector<Stack> queue;
  for (Stack& s : stacks_of(initial_))
    if (seen.insert(s).second) queue.push_back(std::move(s));
  std::vector<Stack> next;
  std::unordered_set<Stack, KeyHash> tops;
  bool recursive = false;  // a stack grew past precompute_depth: the grammar nests without end
  for (size_t i = 0; i < queue.size() && !(recursive && i >= limits_.precompute_stacks); ++i) {
    Stack s = queue[i];
    if (s.empty()) continue;
    if (tops.emplace(s.end() - long(std::min(s.size(), kTopFrames)), s.end()).second) {
      top_mask(s);
      if (mask_bytes_ > limits_.max_mask_cache_bytes)
        throw GrammarError("the structured output grammar needs more than " +
                               std::to_string(limits_.max_mask_cache_bytes >> 20) +
                               " MiB of token masks; simplify the schema, pattern or grammar",
                           "size");
      if (thread_cpu_ms() > deadline) return false;  // the rest is walked on first use
    }
    s.back() += 1;
    next.clear();
    expand(s, next, 0);
    for (Stack& o : next) {
      for (int32_t& f : o)
        if (auto it = precompute_skip_.find(f); it != precompute_skip_.end()) f = it->second;
      if (o.size() > limits_.precompute_depth) recursive = true;
      else if (seen.insert(o).second) queue.push_back(std::move(o));
    }
    ++precomputed_stacks_;
  }
  return precompute_complete_ = true;
}

GrammarAutomaton::Stats GrammarAutomaton::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s;
  s.states = states_.size();
  for (const auto& st : states_) s.cached_masks += st.mask.form != CompactMask::kNone;
  s.mask_cache_bytes = mask_bytes_;
  s.mask_hits = hits_;
  s.mask_misses = misses_;
  s.tops = top_masks_.size();
  s.top_walks = top_walks_;
  s.shared_walks = shared_walks_;
  s.precomputed_stacks = precomputed_stacks_;
  s.precompute_complete = precompute_complete_;
  return s;
}

}  // namespace striker::grammar
