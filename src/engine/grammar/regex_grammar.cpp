#include "engine/grammar/regex_grammar.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace striker::grammar {
namespace {

constexpr uint32_t kMaxCp = 0x10FFFF;
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive code point ranges

Ranges normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& x : r) {
    if (!out.empty() && x.first <= out.back().second + 1) out.back().second = std::max(out.back().second, x.second);
    else out.push_back(x);
  }
  return out;
}

Ranges complement(const Ranges& in) {
  Ranges out;
  uint32_t next = 0;
  for (const auto& [a, b] : normalize(in)) {
    if (a > next) out.emplace_back(next, a - 1);
    next = b + 1;
  }
  if (next <= kMaxCp) out.emplace_back(next, kMaxCp);
  return out;
}

Ranges subtract(const Ranges& in, const Ranges& cut) { return complement(normalize([&] {
    Ranges u = complement(in);
    u.insert(u.end(), cut.begin(), cut.end());
    return u;
  }())); }

const Ranges kDigit{{'0', '9'}};
const Ranges kWord{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace{{'\t', '\r'}, {' ', ' '}};

class RegexParser {
 public:
  RegexParser(Grammar& g, std::string_view p, const RegexOptions& o) : g_(g), p_(p), o_(o) {}

  Element parse() {
    if (peek('^')) ++i_;
    Element e = alternation();
    if (i_ < p_.size()) fail(p_[i_] == ')' ? "unbalanced ')'" : "unexpected character");
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw GrammarError("invalid or unsupported regex at offset " + std::to_string(i_) + ": " + why, "regex");
  }
  bool peek(char c) const { return i_ < p_.size() && p_[i_] == c; }

  Element alternation() {
    std::vector<Sequence> alts{sequence()};
    while (peek('|')) {
      ++i_;
      alts.push_back(sequence());
    }
    return g_.alternatives("re", std::move(alts));
  }

  Sequence sequence() {
    Sequence seq;
    while (i_ < p_.size() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '$') {
        ++i_;
        if (i_ != p_.size()) fail("'$' is only supported at the end");
        break;
      }
      Element atom_e = atom();
      seq.push_back(quantified(atom_e));
    }
    return seq;
  }

  int64_t number() {
    const size_t start = i_;
    int64_t v = 0;
    while (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') {
      v = v * 10 + (p_[i_++] - '0');
      if (v > o_.max_repeat) fail("repetition count larger than " + std::to_string(o_.max_repeat));
    }
    if (i_ == start) fail("expected a number in {}");
    return v;
  }

  Element quantified(Element e) {
    for (;;) {
      int64_t lo = -1, hi = -1;
      if (peek('*')) { lo = 0; ++i_; }
      else if (peek('+')) { lo = 1; ++i_; }
      else if (peek('?')) { lo = 0; hi = 1; ++i_; }
      else if (peek('{') && i_ + 1 < p_.size() && p_[i_ + 1] >= '0' && p_[i_ + 1] <= '9') {
        ++i_;
        lo = number();
        hi = lo;
        if (peek(',')) {
          ++i_;
          hi = peek('}') ? -1 : number();
        }
        if (!peek('}')) fail("unterminated {}");
        ++i_;
      } else {
        return e;
      }
      if (hi >= 0 && hi < lo) fail("repetition {m,n} with n < m");
      if (peek('?')) ++i_;  // lazy: same language
      if (peek('+')) fail("possessive quantifiers are not supported");
      e = g_.repeat(e, lo, hi);
    }
  }

  uint32_t code_point() {
    if (tok::utf8_valid_len(p_, i_) == 0) fail("invalid UTF-8");
    return tok::utf8_next(p_, i_);
  }

  uint32_t hex(size_t n) {
    if (i_ + n > p_.size()) fail("truncated hex escape");
    uint32_t v = 0;
    for (size_t k = 0; k < n; ++k) {
      const char c = p_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f') v |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= uint32_t(c - 'A' + 10);
      else fail("bad hex digit");
    }
    return v;
  }

  // After a backslash: a class (\d ...) or one code point.
  Ranges escape() {
    if (i_ >= p_.size()) fail("trailing backslash");
    const char c = p_[i_++];
    switch (c) {
      case 'd': return kDigit;
      case 'D': return complement(kDigit);
      case 'w': return kWord;
      case 'W': return complement(kWord);
      case 's': return kSpace;
      case 'S': return complement(kSpace);
      case 'n': return {{'\n', '\n'}};
      case 't': return {{'\t', '\t'}};
      case 'r': return {{'\r', '\r'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case '0': return {{0, 0}};
      case 'x': { const uint32_t v = hex(2); return {{v, v}}; }
      case 'u': { const uint32_t v = hex(4); return {{v, v}}; }
      case 'b': case 'B': fail("word boundaries (\\b) are not supported");
      case 'A': case 'Z': case 'z': fail("anchors other than a leading ^ and trailing $ are not supported");
      default:
        if (c >= '1' && c <= '9') fail("backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) fail(std::string("unknown escape \\") + c);
        --i_;
        const uint32_t cp = code_point();
        return {{cp, cp}};
    }
  }

  Ranges bracket() {
    // at '[' already consumed
    bool negate = false;
    if (peek('^')) { negate = true; ++i_; }
    Ranges r;
    bool first = true;
    while (i_ < p_.size() && (first || p_[i_] != ']')) {
      first = false;
      Ranges lo_r;
      if (p_[i_] == '\\') {
        ++i_;
        lo_r = escape();
      } else if (p_[i_] == '[' && i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
        fail("POSIX classes [:name:] are not supported");
      } else {
        const uint32_t cp = code_point();
        lo_r = {{cp, cp}};
      }
      if (peek('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']' && lo_r.size() == 1 && lo_r[0].first == lo_r[0].second) {
        ++i_;
        uint32_t hi;
        if (p_[i_] == '\\') {
          ++i_;
          Ranges h = escape();
          if (h.size() != 1 || h[0].first != h[0].second) fail("a class cannot end a range");
          hi = h[0].first;
        } else {
          hi = code_point();
        }
        if (hi < lo_r[0].first) fail("range out of order in []");
        r.emplace_back(lo_r[0].first, hi);
      } else {
        r.insert(r.end(), lo_r.begin(), lo_r.end());
      }
    }
    if (!peek(']')) fail("unterminated [");
    ++i_;
    r = normalize(r);
    return negate ? complement(r) : r;
  }

  Element chars(Ranges r) {
    r = normalize(r);
    if (o_.json_string) {
      // Characters JSON must escape: quote and backslash as escapes, controls never.
      const bool quote = std::any_of(r.begin(), r.end(), [](auto x) { return x.first <= '"' && '"' <= x.second; });
      const bool bslash = std::any_of(r.begin(), r.end(), [](auto x) { return x.first <= '\\' && '\\' <= x.second; });
      r = subtract(r, {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
      std::vector<Sequence> alts;
      if (quote) alts.push_back({g_.bytes(single_byte('\\')), g_.bytes(single_byte('"'))});
      if (bslash) alts.push_back({g_.bytes(single_byte('\\')), g_.bytes(single_byte('\\'))});
      return ranges_element(r, std::move(alts));
    }
    return ranges_element(r, {});
  }

  Element ranges_element(const Ranges& r, std::vector<Sequence> alts) {
    if (r.empty() && alts.empty()) fail("a character class that matches nothing");
    return code_point_set(g_, r, std::move(alts));
  }

  Element atom() {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (peek('?')) {
        ++i_;
        if (peek(':')) {
          ++i_;
        } else if (peek('P') && i_ + 1 < p_.size() && p_[i_ + 1] == '<') {
          const size_t close = p_.find('>', i_);
          if (close == std::string_view::npos) fail("unterminated group name");
          i_ = close + 1;
        } else if (peek('<') && i_ + 1 < p_.size() && p_[i_ + 1] != '=' && p_[i_ + 1] != '!') {
          const size_t close = p_.find('>', i_);
          if (close == std::string_view::npos) fail("unterminated group name");
          i_ = close + 1;
        } else {
          fail("lookaround and inline flags are not supported");
        }
      }
      Element e = alternation();
      if (!peek(')')) fail("missing ')'");
      ++i_;
      return e;
    }
    if (c == '[') {
      ++i_;
      return chars(bracket());
    }
    if (c == '.') {
      ++i_;
      return chars(complement({{'\n', '\n'}}));
    }
    if (c == '\\') {
      ++i_;
      return chars(escape());
    }
    if (c == '*' || c == '+' || c == '?') fail("nothing to repeat");
    if (c == '^') fail("'^' is only supported at the start");
    if (c == '{' && i_ + 1 < p_.size() && p_[i_ + 1] >= '0' && p_[i_ + 1] <= '9') fail("nothing to repeat");
    const uint32_t cp = code_point();
    return chars({{cp, cp}});
  }

  Grammar& g_;
  std::string_view p_;
  const RegexOptions& o_;
  size_t i_ = 0;
};

}  // namespace

CodePointRanges complement_ranges(const CodePointRanges& ranges) { return complement(ranges); }

Element code_point_set(Grammar& g, const CodePointRanges& ranges, std::vector<Sequence> alts, const char* keyword) {
  ByteSet ascii;
  for (const auto& [a, b] : normalize(ranges)) {
    for (uint32_t c = a; c <= std::min<uint32_t>(b, 0x7F); ++c) ascii.set(c);
    if (b >= 0x80) utf8_range_sequences(g, std::max<uint32_t>(a, 0x80), b, alts);
  }
  if (ascii.any()) alts.push_back({g.bytes(ascii)});
  if (alts.empty()) throw GrammarError("a character class that matches nothing", keyword);
  if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
  return g.alternatives("class", std::move(alts));
}

Element regex_to_grammar(Grammar& g, std::string_view pattern, const RegexOptions& options) {
  return RegexParser(g, pattern, options).parse();
}

std::string json_escape_code_point(uint32_t cp) {
  switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default: break;
  }
  std::string out;
  if (cp < 0x20) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    return buf;
  }
  tok::utf8_append(out, cp);
  return out;
}

}  // namespace striker::grammar
