#include "engine/grammar/json_grammar.h"

#include <string>

namespace striker::grammar {

Element JsonPieces::ws() {
  if (!ws_ && !whitespace_) ws_ = g_.alternatives("nows", {{}});
  if (!ws_) {
    // One optional line break, then indentation: what pretty-printers write between tokens.
    const Element newline = g_.alternatives("newline", {{g_.bytes(single_byte('\n'))},
                                                        {g_.bytes(single_byte('\r')), g_.bytes(single_byte('\n'))}});
    const Element indent = g_.repeat(g_.bytes(single_byte(' ') | single_byte('\t')), 0, kMaxIndent);
    ws_ = g_.alternatives("ws", {{g_.optional(newline), indent}});
  }
  return *ws_;
}

Element JsonPieces::string_char() {
  if (!char_) {
    std::vector<Sequence> alts;
    // Unescaped: U+0020.. except '"' and '\'.
    utf8_range_sequences(g_, 0x20, 0x21, alts);
    utf8_range_sequences(g_, 0x23, 0x5B, alts);
    utf8_range_sequences(g_, 0x5D, 0x10FFFF, alts);
    // ASCII alternatives merge into one set for speed.
    ByteSet ascii;
    std::vector<Sequence> merged;
    for (auto& a : alts) {
      if (a.size() == 1 && g_.sets()[size_t(a[0].index)].count() &&
          (g_.sets()[size_t(a[0].index)] & ~byte_range(0, 0x7F)).none())
        ascii |= g_.sets()[size_t(a[0].index)];
      else
        merged.push_back(std::move(a));
    }
    merged.push_back({g_.bytes(ascii)});
    const Element bs = g_.bytes(single_byte('\\'));
    ByteSet simple;
    for (char c : {'"', '\\', '/', 'b', 'f', 'n', 'r', 't'}) simple.set(uint8_t(c));
    merged.push_back({bs, g_.bytes(simple)});
    // \uXXXX outside the surrogates (a lone or paired surrogate would not count as one character).
    ByteSet hex = byte_range('0', '9') | byte_range('a', 'f') | byte_range('A', 'F');
    ByteSet hex_not_d = byte_range('0', '9') | byte_range('a', 'c') | byte_range('A', 'C') | byte_range('e', 'f') |
                        byte_range('E', 'F');
    const Element u = g_.bytes(single_byte('u'));
    merged.push_back({bs, u, g_.bytes(hex_not_d), g_.bytes(hex), g_.bytes(hex), g_.bytes(hex)});
    merged.push_back({bs, u, g_.bytes(single_byte('d') | single_byte('D')), g_.bytes(byte_range('0', '7')),
                      g_.bytes(hex), g_.bytes(hex)});
    char_ = g_.alternatives("char", std::move(merged));
  }
  return *char_;
}

Element JsonPieces::string(int64_t min_len, int64_t max_len) {
  auto it = strings_.find({min_len, max_len});
  if (it != strings_.end()) return it->second;
  const Element q = g_.bytes(single_byte('"'));
  const Element e = g_.alternatives("string", {{q, g_.repeat(string_char(), min_len, max_len), q}});
  strings_.emplace(std::make_pair(min_len, max_len), e);
  return e;
}

Element JsonPieces::digits(int64_t n) {
  if (!digit_) digit_ = g_.bytes(byte_range('0', '9'));
  Sequence seq(size_t(n), *digit_);
  return g_.alternatives("digits", {std::move(seq)});
}

Element JsonPieces::integer() {
  if (!integer_) integer_ = integer_range(std::nullopt, std::nullopt);
  return *integer_;
}

Element JsonPieces::number() {
  if (!number_) {
    const Element digit = g_.bytes(byte_range('0', '9'));
    const Element frac = g_.optional(g_.alternatives("frac", {{g_.bytes(single_byte('.')), g_.plus(digit)}}));
    const Element exp = g_.optional(g_.alternatives(
        "exp", {{g_.bytes(single_byte('e') | single_byte('E')), g_.optional(g_.bytes(single_byte('+') | single_byte('-'))),
                 g_.plus(digit)}}));
    number_ = g_.alternatives("number", {{integer(), frac, exp}});
  }
  return *number_;
}

// Same-length decimal strings lo <= hi: the classic split into prefix + digit range + free digits.
Element JsonPieces::same_length_range(const std::string& lo, const std::string& hi) {
  const size_t n = lo.size();
  if (n == 0) return g_.alternatives("empty", {{}});
  if (lo == hi) return g_.literal(lo);
  if (lo[0] == hi[0]) {
    Sequence seq;
    g_.append_literal(seq, lo.substr(0, 1));
    seq.push_back(same_length_range(lo.substr(1), hi.substr(1)));
    return g_.alternatives("range", {std::move(seq)});
  }
  const std::string rest_lo = lo.substr(1), rest_hi = hi.substr(1);
  if (rest_lo == std::string(n - 1, '0') && rest_hi == std::string(n - 1, '9'))
    return g_.alternatives("range", {{g_.bytes(byte_range(uint8_t(lo[0]), uint8_t(hi[0]))), digits(int64_t(n - 1))}});
  std::vector<Sequence> alts;
  alts.push_back({g_.bytes(single_byte(uint8_t(lo[0]))), same_length_range(rest_lo, std::string(n - 1, '9'))});
  if (lo[0] + 1 <= hi[0] - 1)
    alts.push_back({g_.bytes(byte_range(uint8_t(lo[0] + 1), uint8_t(hi[0] - 1))), digits(int64_t(n - 1))});
  alts.push_back({g_.bytes(single_byte(uint8_t(hi[0]))), same_length_range(std::string(n - 1, '0'), rest_hi)});
  return g_.alternatives("range", std::move(alts));
}

Element JsonPieces::nonneg_range(uint64_t lo, std::optional<uint64_t> hi) {
  std::vector<Sequence> alts;
  uint64_t pow = 1;  // 10^(len-1)
  for (int len = 1; len <= 20; ++len) {
    const uint64_t first = len == 1 ? 0 : pow;
    const uint64_t last = len >= 20 ? UINT64_MAX : pow * 10 - 1;
    const uint64_t a = std::max(lo, first);
    const uint64_t b = hi ? std::min(*hi, last) : last;
    if (a <= b) alts.push_back({same_length_range(std::to_string(a), std::to_string(b))});
    if (hi && last >= *hi) break;
    if (!hi && len >= 19) {
      // Past 19 digits: any longer integer.
      alts.push_back({g_.bytes(byte_range('1', '9')), digits(19), g_.star(g_.bytes(byte_range('0', '9')))});
      break;
    }
    if (len < 20) pow *= 10;
  }
  if (alts.empty()) throw GrammarError("empty integer range", "minimum");
  return g_.alternatives("uint", std::move(alts));
}

Element JsonPieces::integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (lo && hi && *lo > *hi)
    throw GrammarError("no integer satisfies minimum " + std::to_string(*lo) + " and maximum " + std::to_string(*hi),
                       "minimum");
  std::vector<Sequence> alts;
  // Non-negative part.
  if (!hi || *hi >= 0) {
    const uint64_t a = lo && *lo > 0 ? uint64_t(*lo) : 0;
    std::optional<uint64_t> b;
    if (hi) b = uint64_t(*hi);
    alts.push_back({nonneg_range(a, b)});
  }
  // Negative part: "-" magnitude in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const uint64_t a = hi && *hi < 0 ? uint64_t(-(*hi + 1)) + 1 : 1;
    std::optional<uint64_t> b;
    if (lo) b = uint64_t(-(*lo + 1)) + 1;
    alts.push_back({g_.bytes(single_byte('-')), nonneg_range(a, b)});
  }
  return g_.alternatives("int", std::move(alts));
}

Element JsonPieces::magnitude(uint64_t a, bool a_excl, std::optional<uint64_t> b, bool b_excl) {
  const Element digit = g_.bytes(byte_range('0', '9'));
  const Element dot = g_.bytes(single_byte('.'));
  const Element any_frac = g_.optional(g_.alternatives("frac", {{dot, g_.plus(digit)}}));
  const Element zero_frac = g_.optional(g_.alternatives("frac0", {{dot, g_.plus(g_.bytes(single_byte('0')))}}));
  const Element nonzero_frac =
      g_.alternatives("frac+", {{dot, g_.star(digit), g_.bytes(byte_range('1', '9')), g_.star(digit)}});
  auto lit = [&](uint64_t v) { return nonneg_range(v, v); };
  std::vector<Sequence> alts;
  if (b && *b == a) {
    if (!a_excl && !b_excl) alts.push_back({lit(a), zero_frac});
  } else {
    alts.push_back({lit(a), a_excl ? nonzero_frac : any_frac});
    if (!b) {
      alts.push_back({nonneg_range(a + 1, std::nullopt), any_frac});
    } else {
      if (*b >= a + 2) alts.push_back({nonneg_range(a + 1, *b - 1), any_frac});
      if (!b_excl) alts.push_back({lit(*b), zero_frac});
    }
  }
  if (alts.empty()) throw GrammarError("no number satisfies the bounds", "minimum");
  return g_.alternatives("mag", std::move(alts));
}

Element JsonPieces::number_range(std::optional<int64_t> lo, bool lo_excl, std::optional<int64_t> hi, bool hi_excl) {
  if (lo && hi && (*lo > *hi || (*lo == *hi && (lo_excl || hi_excl))))
    throw GrammarError("no number satisfies the minimum/maximum bounds", "minimum");
  std::vector<Sequence> alts;
  // v >= 0 side: magnitude in [max(lo, 0), hi].
  if (!hi || *hi > 0 || (*hi == 0 && !hi_excl)) {
    const bool from_lo = lo && *lo >= 0;
    const uint64_t a = from_lo ? uint64_t(*lo) : 0;
    std::optional<uint64_t> b;
    if (hi) b = uint64_t(*hi);
    alts.push_back({magnitude(a, from_lo && lo_excl, b, hi_excl)});
  }
  // v < 0 side: "-" magnitude m, v = -m, m in (max(-hi, 0), -lo] with m > 0.
  if (!lo || *lo < 0) {
    const bool from_hi = hi && *hi < 0;
    const uint64_t a = from_hi ? uint64_t(-(*hi + 1)) + 1 : 0;
    std::optional<uint64_t> b;
    if (lo) b = uint64_t(-(*lo + 1)) + 1;
    alts.push_back({g_.bytes(single_byte('-')), magnitude(a, from_hi ? hi_excl : true, b, lo_excl)});
  }
  return g_.alternatives("num", std::move(alts));
}

Element JsonPieces::value() {
  if (!value_) {
    const int32_t v = g_.add_rule("value");
    value_ = Grammar::ref(v);
    const int32_t o = g_.add_rule("object");
    object_ = Grammar::ref(o);
    const int32_t a = g_.add_rule("array");
    array_ = Grammar::ref(a);
    g_.add_alt(v, {*object_});
    g_.add_alt(v, {*array_});
    g_.add_alt(v, {string()});
    g_.add_alt(v, {number()});
    for (const char* lit : {"true", "false", "null"}) g_.add_alt(v, {g_.literal(lit)});
    const Element w = ws();
    const Element comma = g_.bytes(single_byte(','));
    // object ::= "{" ws ( member ( "," ws member )* )? "}" ; member ::= string ws ":" ws value ws
    const Element member = g_.alternatives("member", {{string(), w, g_.bytes(single_byte(':')), w, *value_, w}});
    const Element more = g_.star(g_.alternatives("more", {{comma, w, member}}));
    g_.add_alt(o, {g_.bytes(single_byte('{')), w, g_.optional(g_.alternatives("members", {{member, more}})),
                   g_.bytes(single_byte('}'))});
    const Element item = g_.alternatives("item", {{*value_, w}});
    const Element more_items = g_.star(g_.alternatives("more", {{comma, w, item}}));
    g_.add_alt(a, {g_.bytes(single_byte('[')), w, g_.optional(g_.alternatives("items", {{item, more_items}})),
                   g_.bytes(single_byte(']'))});
  }
  return *value_;
}

Element JsonPieces::object() {
  value();
  return *object_;
}

Element JsonPieces::array() {
  value();
  return *array_;
}

}  // namespace striker::grammar
