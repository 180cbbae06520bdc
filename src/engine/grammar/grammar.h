// A context-free grammar over bytes (plus whole special tokens), the one form every structured
// output compiles to: JSON Schema, regex, choice and GBNF all become a `Grammar`, and the
// matcher (grammar_automaton.h) runs it as a pushdown automaton. No CUDA, no tokenizer here.
#pragma once
#include <array>
#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/thread_clock.h"

namespace striker::grammar {

// A structured-output request the server must refuse (bad schema, regex, grammar, too large).
// `keyword` names what was wrong (a schema keyword, "regex", "grammar", ...).
class GrammarError : public Error {
 public:
  GrammarError(const std::string& what, std::string keyword) : Error(what), keyword_(std::move(keyword)) {}
  const std::string& keyword() const { return keyword_; }

 private:
  std::string keyword_;
};

using ByteSet = std::bitset<256>;

// One symbol of an alternative: a byte out of a set, a whole (special) token, or a rule.
struct Element {
  enum Kind : uint8_t { Bytes, Token, Rule };
  Kind kind = Bytes;
  int32_t index = 0;  // Bytes: index into Grammar::sets; Token: token id; Rule: rule id
};

using Sequence = std::vector<Element>;

struct Rule {
  std::string name;
  std::vector<Sequence> alts;  // an empty alternative matches the empty string
};

// A place inside a bounded repetition that `Grammar::repeat` unrolled: position `pos` of
// alternative `alt` of `rule` is the same point of the repeated element as `ref_pos` of
// `ref_alt` of `ref_rule` (the chain's first link), and the two differ only in how many more
// copies may (or must) follow. Up to `agree` further copies fit either way, so any token of at
// most `agree` bytes fares the same from both (when the element cannot match the empty string,
// which the matcher checks): the matcher shares one token walk between all the counts.
struct CountedPosition {
  int32_t rule, alt, pos;
  int32_t ref_rule, ref_alt, ref_pos;
  int64_t agree;
  Element element;  // the repeated element
};

// Size limits every builder checks, so a hostile schema or grammar is refused, not compiled for
// minutes: the matcher's work per byte grows with these.
struct GrammarLimits {
  size_t max_rules = 100000;
  size_t max_elements = 1000000;
  double max_build_ms = 0;  // > 0: compiling for longer than this (thread CPU time) is refused
};

class Grammar {
 public:
  const std::vector<Rule>& rules() const { return rules_; }
  const std::vector<ByteSet>& sets() const { return sets_; }
  int32_t root() const { return root_; }
  size_t num_elements() const { return elements_; }

  // Builders. Every add checks the limits and throws GrammarError("... too large", "size").
  int32_t add_rule(std::string name);  // an empty rule (no alternatives yet)
  void add_alt(int32_t rule, Sequence alt);
  Element bytes(const ByteSet& set);
  static Element token(int32_t id) { return {Element::Token, id}; }
  static Element ref(int32_t rule) { return {Element::Rule, rule}; }
  void set_root(int32_t rule) { root_ = rule; }
  void set_limits(const GrammarLimits& l) {
    limits_ = l;
    started_ms_ = thread_cpu_ms();
  }
  Rule& rule(int32_t id) { return rules_[size_t(id)]; }

  // Helpers that make small rules (each returns the element to use in a sequence).
  void append_literal(Sequence& seq, std::string_view text);
  Element literal(std::string_view text);                     // a rule matching exactly `text`
  Element alternatives(std::string name, std::vector<Sequence> alts);
  Element optional(const Element& e);                         // e | ""
  Element star(const Element& e);                             // e*  (right recursive)
  Element plus(const Element& e);                             // e+
  // e{min,max}; max < 0 means unbounded. Bounded repeats unroll into max rules (each unrolled
  // position is recorded in counted_positions()).
  Element repeat(const Element& e, int64_t min, int64_t max);
  const std::vector<CountedPosition>& counted_positions() const { return counted_; }

  // Throws GrammarError when a rule has no alternative, a reference is dangling, or a rule
  // can reach itself without consuming input (left recursion, which a pushdown matcher
  // cannot run); also computes which rules match the empty string.
  void validate() const;
  std::vector<char> nullable() const;  // per rule: it can match the empty string
  std::string describe() const;  // GBNF-like dump for tests and errors

 private:
  void count(size_t elements);
  void record_counted(const Element& e, int64_t min, int32_t repeat_rule, const std::vector<int32_t>& tails);
  std::vector<Rule> rules_;
  std::vector<ByteSet> sets_;
  std::vector<CountedPosition> counted_;
  std::unordered_map<ByteSet, int32_t> set_index_;  // sets repeat a lot (digits, string characters)
  int32_t root_ = -1;
  size_t elements_ = 0;
  GrammarLimits limits_;
  double started_ms_ = thread_cpu_ms();
};

ByteSet byte_range(uint8_t lo, uint8_t hi);
ByteSet single_byte(uint8_t b);

// UTF-8: appends rules matching exactly one code point in [lo, hi] as alternatives of
// sequences of byte sets (the standard split into same-length, same-prefix ranges).
void utf8_range_sequences(Grammar& g, uint32_t lo, uint32_t hi, std::vector<Sequence>& out);

}  // namespace striker::grammar
