// The JSON building blocks every JSON grammar shares: whitespace, strings (with length bounds),
// numbers (with integer ranges), literals and "any JSON value". Each piece is made once per
// grammar and reused. Whitespace between tokens is one optional line break ("\n" or "\r\n")
// then up to kMaxIndent spaces or tabs: what pretty-printers write (json.dumps(indent=...)),
// bounded so a model cannot pad forever (as xgrammar's max_whitespace_cnt).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "engine/grammar/grammar.h"

namespace striker::grammar {

constexpr int64_t kMaxIndent = 24;

class JsonPieces {
 public:
  // `whitespace` false: compact JSON, nothing between tokens (vLLM's disable_any_whitespace).
  explicit JsonPieces(Grammar& g, bool whitespace = true) : g_(g), whitespace_(whitespace) {}
  Grammar& grammar() { return g_; }

  Element ws();
  Element string_char();  // one code point of string content (escapes included)
  // A quoted string of [min, max] code points (max < 0: unbounded).
  Element string(int64_t min_len = 0, int64_t max_len = -1);
  Element number();   // any JSON number
  Element integer();  // any JSON integer (no fraction, no exponent)
  // Integers in [lo, hi] (nullopt = unbounded), canonical decimal (no leading zeros, no -0).
  Element integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);
  // Numbers in the interval; bounds must be integers. No exponent form.
  Element number_range(std::optional<int64_t> lo, bool lo_exclusive, std::optional<int64_t> hi, bool hi_exclusive);
  Element value();   // any JSON value
  Element object();  // any JSON object
  Element array();   // any JSON array

 private:
  Element digits(int64_t n);  // exactly n digits
  Element nonneg_range(uint64_t lo, std::optional<uint64_t> hi);
  Element same_length_range(const std::string& lo, const std::string& hi);
  Element magnitude(uint64_t a, bool a_excl, std::optional<uint64_t> b, bool b_excl);
  Grammar& g_;
  bool whitespace_;
  // Strings of equal bounds share their rules, so their states (and cached masks) are shared.
  std::map<std::pair<int64_t, int64_t>, Element> strings_;
  std::optional<Element> ws_, char_, number_, integer_, value_, object_, array_, digit_;
};

}  // namespace striker::grammar
