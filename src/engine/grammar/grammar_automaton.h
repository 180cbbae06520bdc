// The grammar run as a byte-level pushdown automaton, made fast by two caches:
//
//  * Parser states are interned. A state is the set of stacks a nondeterministic pushdown
//    matcher could be in (each stack's top is a byte set or a whole token; an empty stack
//    means the input may end here). Transitions state x byte -> state are computed on first
//    use and kept in a 256-entry table per state: a lazily built DFA over the reachable part
//    of the (possibly infinite) pushdown state space.
//  * Token masks are cached per state. A mask is one walk over the vocabulary trie
//    (token_vocabulary.h) in depth-first order using those transitions, skipping any subtree
//    whose prefix dies; a token may run through several terminals and rules on the way.
//  * Most of that walk does not depend on the bottom of the stacks (a string's characters are
//    the same in every field): a state's mask is the union over its stacks, and each stack's
//    top kTopFrames frames are walked on their own, above a "bottom" marker, once per distinct
//    top (cached). Tokens that run past the marker (a closing quote and what follows) are
//    recorded as trie subtrees, finished from the state of the rest of the stack (what lies
//    below the top), and cached per (top, rest) pair: the copies of a string's characters,
//    or of an array's items, share both. This is xgrammar's context-independent token cache.
//  * The tops are walked when the grammar is compiled (precompute()): every stack the grammar
//    can reach, up to a depth, contributes its top, so a new schema's first output meets few
//    walks. The copies of an unrolled bounded repetition (maxLength, maxItems, {m,n}) share one
//    walk: a top with c more copies allowed agrees with the chain's reference top on every
//    token shorter than c bytes, so only the trie's deeper subtrees are walked for it
//    (grammar.h, CountedPosition).
//
// After a state's first visit its mask costs a lookup and a copy, and advancing by a token is
// one table lookup per byte. Both caches are bounded; the state bound turns a grammar whose
// reachable states explode into a clear GrammarError instead of unbounded memory.
// Thread safety: every public call takes the automaton's mutex (choices of one request share it).
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/grammar/grammar.h"
#include "engine/grammar/token_vocabulary.h"

namespace striker::grammar {

struct AutomatonLimits {
  size_t max_states = 200000;        // interned parser states
  size_t max_stacks_per_state = 4096;  // ambiguity bound
  size_t max_stack_depth = 4096;
  size_t max_mask_cache_bytes = size_t(64) << 20;
  // precompute(): stacks deeper than this are left to the first visit (a recursive grammar's
  // deep tops repeat its shallow ones), a recursive grammar stops after this many stacks, and
  // any after this much CPU time (the rest is walked on first use, as without a precompute).
  size_t precompute_depth = 24;
  size_t precompute_stacks = 30000;
  double precompute_ms = 1000;
};

class GrammarAutomaton {
 public:
  static constexpr int32_t kDead = -1;

  GrammarAutomaton(const Grammar& grammar, std::shared_ptr<const TokenVocabulary> vocab,
                   const AutomatonLimits& limits = {});

  int32_t initial_state() const { return initial_; }
  // The state after `token` (its bytes, or the token itself where the grammar names it), or kDead.
  int32_t advance(int32_t state, int32_t token);
  // The state after raw bytes (tests, and the reference matcher in the benchmark).
  int32_t advance_bytes(int32_t state, std::string_view bytes);
  bool accepts(int32_t state);   // the input may end here
  bool complete(int32_t state);  // it must end here (nothing else can follow)
  // Allowed next tokens as a packed bitset (bit i of word i/32 = token i), `words` long
  // (vocab.words()). The grammar's own tokens only; the caller adds stop tokens where accepts().
  void fill_mask(int32_t state, std::span<uint32_t> words);
  // The same mask by the direct route: one walk of the whole trie from the real state, no top
  // caches (tests compare the two; the benchmark times it).
  void fill_mask_exact(int32_t state, std::span<uint32_t> words);
  // Walks the tops of every stack the grammar can reach (see above), within the limits; false
  // when it ran out of time first. Throws GrammarError("size") past the mask cache bound.
  bool precompute();

  struct Stats {
    size_t states = 0;
    size_t cached_masks = 0;
    size_t mask_cache_bytes = 0;
    uint64_t mask_hits = 0, mask_misses = 0;
    size_t tops = 0;            // distinct stack tops with a cached walk
    size_t top_walks = 0;       // of which walked the whole trie
    size_t shared_walks = 0;    // walked only the subtrees deeper than a counted reference agrees on
    size_t precomputed_stacks = 0;
    bool precompute_complete = false;
  };
  Stats stats();
  const TokenVocabulary& vocab() const { return *vocab_; }

 private:
  enum Kind : uint8_t { kBytes, kToken, kRule, kEnd, kBottom };
  static constexpr size_t kTopFrames = 4;
  using Stack = std::vector<int32_t>;
  // A cached mask: sparse allowed ids, sparse disallowed ids, or the full bitset.
  struct CompactMask {
    enum Form : uint8_t { kNone, kAllowed, kDisallowed, kFull } form = kNone;
    std::vector<uint32_t> data;
  };
  struct State {
    std::vector<int32_t> key;  // stacks serialised: [len, positions...]*
    std::unique_ptr<int32_t[]> next;  // 256 byte transitions; kUnknown until computed
    std::vector<std::pair<int32_t, int32_t>> token_next;  // whole-token transitions (token, state)
    bool accept = false;
    bool any_terminal = false;
    bool bottom = false;  // a stack has popped down to the bottom marker (a truncated state)
    ByteSet first;        // bytes some stack top accepts: any other byte is dead without a step
    bool tokens_done = false;
    CompactMask mask;
  };
  static constexpr int32_t kUnknown = -2;

  void flatten(const Grammar& g);
  void expand(Stack& stack, std::vector<Stack>& out, size_t depth) const;
  int32_t intern(std::vector<Stack>& stacks);
  std::vector<Stack> stacks_of(int32_t state) const;
  int32_t step_byte(int32_t state, uint8_t b);
  int32_t step_symbol(int32_t state, int32_t symbol);  // 0..255 byte, 256 + id token
  void compute_token_transitions(int32_t state);
  // Walks trie nodes [begin, end) whose parent (at depth-1 of `begin`) is in `state`, OR-ing
  // viable tokens into `words`. With `uncertain`, nodes where a stack reached the bottom marker
  // and that have children are recorded (their children depend on the real stack below).
  // Skips (and records nothing in) subtrees no deeper than `shallow`.
  void walk_nodes(int32_t state, size_t begin, size_t end, std::span<uint32_t> words,
                  std::vector<int32_t>* uncertain, size_t shallow = 0);
  struct TopMask {
    int32_t id = 0;                  // the truncated state
    CompactMask viable;              // viable for any context below
    std::vector<int32_t> uncertain;  // trie nodes where a stack reached the bottom marker
    // A counted copy: also the reference's viable tokens of at most base_len bytes.
    const TopMask* base = nullptr;
    size_t base_len = 0;
  };
  const TopMask& top_mask(const Stack& stack);  // of the stack's top kTopFrames frames
  const TopMask& top_mask_of(const Stack& top);  // `top` starts with the bottom marker
  // The state of what lies below a stack's top (kDead when the top is the whole stack), and the
  // tokens of the top's uncertain subtrees that this rest accepts.
  int32_t rest_state(const Stack& stack);
  const CompactMask& finish_mask(const TopMask& top, int32_t rest);
  void add_stack_mask(const Stack& stack, std::span<uint32_t> words);
  void compute_mask(int32_t state, std::span<uint32_t> words);
  void store_mask(CompactMask& m, std::span<const uint32_t> words);
  bool load_mask(const CompactMask& m, std::span<uint32_t> words) const;
  // words |= m; with `only`, just the ids set in that mask.
  void or_mask(const CompactMask& m, std::span<uint32_t> words, const uint32_t* only = nullptr) const;

  std::shared_ptr<const TokenVocabulary> vocab_;
  AutomatonLimits limits_;
  std::vector<uint8_t> kind_;
  std::vector<int32_t> arg_;
  std::vector<ByteSet> sets_;
  std::vector<std::vector<int32_t>> alt_starts_;  // per rule
  std::vector<int32_t> grammar_tokens_;           // token ids any Token element names
  struct KeyHash {
    size_t operator()(const std::vector<int32_t>& v) const;
  };
  std::unordered_map<std::vector<int32_t>, int32_t, KeyHash> index_;
  std::vector<State> states_;
  std::vector<int32_t*> next_;  // states_[i].next.get(): the trie walk's hot loop reads only this
  int32_t initial_ = kDead;
  std::vector<int32_t> walk_states_;  // per trie depth
  std::vector<uint32_t> scratch_;     // a mask being built
  int32_t bottom_pos_ = 0;            // the kBottom position
  std::unordered_map<int32_t, std::shared_ptr<const TopMask>> top_masks_;  // truncated state -> its mask
  struct Counted {
    int32_t ref;   // the reference position
    int64_t agree;  // tokens of up to this many bytes fare the same
  };
  std::unordered_map<int32_t, Counted> counted_;  // position -> its chain's reference
  std::unordered_map<int32_t, int32_t> precompute_skip_;  // copy -> the copy precompute() walks instead
  size_t top_walks_ = 0, shared_walks_ = 0, precomputed_stacks_ = 0;
  bool precompute_complete_ = false;
  std::unordered_map<Stack, int32_t, KeyHash> rest_states_;  // stack below a top -> its state
  std::unordered_map<uint64_t, CompactMask> finish_masks_;    // (top, rest state) -> tokens
  size_t mask_bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
  std::mutex mu_;
};

}  // namespace striker::grammar
