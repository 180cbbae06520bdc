#include "engine/grammar/gbnf_grammar.h"

#include <map>

#include "engine/grammar/regex_grammar.h"
#include "tokenizer/utf8.h"

namespace striker::grammar {
namespace {

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  GbnfParser(Grammar& g, std::string_view t) : g_(g), t_(t) {}

  void parse() {
    skip();
    if (i_ >= t_.size()) fail("the grammar is empty");
    while (i_ < t_.size()) {
      const std::string name = rule_name();
      skip();
      if (t_.substr(i_, 3) != "::=") fail("expected '::=' after rule name '" + name + "'");
      i_ += 3;
      const int32_t id = rule_id(name);
      if (defined_.count(name)) fail("rule '" + name + "' is defined twice");
      defined_[name] = true;
      for (auto& alt : alternatives(false)) g_.add_alt(id, std::move(alt));
    }
    for (const auto& [name, id] : ids_)
      if (!defined_.count(name)) fail("rule '" + name + "' is used but not defined");
    auto root = ids_.find("root");
    if (root == ids_.end()) fail("the grammar has no 'root' rule");
    g_.set_root(root->second);
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    size_t line = 1;
    for (size_t k = 0; k < std::min(i_, t_.size()); ++k) line += t_[k] == '\n';
    throw GrammarError("invalid grammar (line " + std::to_string(line) + "): " + why, "grammar");
  }

  void skip() {
    while (i_ < t_.size()) {
      if (t_[i_] == '#') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      } else if (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r') {
        ++i_;
      } else {
        break;
      }
    }
  }

  std::string rule_name() {
    const size_t start = i_;
    while (i_ < t_.size() && name_char(t_[i_])) ++i_;
    if (i_ == start) fail("expected a rule name");
    return std::string(t_.substr(start, i_ - start));
  }

  int32_t rule_id(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const int32_t id = g_.add_rule(name);
    ids_.emplace(name, id);
    return id;
  }

  // Is the text at i_ the start of the next rule (`name ::=`)?
  bool at_rule_start() const {
    size_t k = i_;
    while (k < t_.size() && name_char(t_[k])) ++k;
    if (k == i_) return false;
    while (k < t_.size() && (t_[k] == ' ' || t_[k] == '\t' || t_[k] == '\n' || t_[k] == '\r')) ++k;
    return t_.substr(k, 3) == "::=";
  }

  std::vector<Sequence> alternatives(bool nested) {
    std::vector<Sequence> alts{sequence(nested)};
    while (i_ < t_.size() && t_[i_] == '|') {
      ++i_;
      alts.push_back(sequence(nested));
    }
    return alts;
  }

  Sequence sequence(bool nested) {
    Sequence seq;
    for (;;) {
      skip();
      if (i_ >= t_.size() || t_[i_] == '|' || t_[i_] == ')') break;
      if (!nested && at_rule_start()) break;
      Element e = atom();
      skip();
      e = repetition(e);
      seq.push_back(e);
    }
    if (nested && i_ >= t_.size()) fail("missing ')'");
    return seq;
  }

  int64_t number(int64_t max = 100000) {
    const size_t start = i_;
    int64_t v = 0;
    while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') {
      v = v * 10 + (t_[i_++] - '0');
      if (v > max) fail("number larger than " + std::to_string(max));
    }
    if (start == i_) fail("expected a number");
    return v;
  }

  Element repetition(Element e) {
    for (;;) {
      if (i_ >= t_.size()) return e;
      const char c = t_[i_];
      if (c == '*') { ++i_; e = g_.star(e); }
      else if (c == '+') { ++i_; e = g_.plus(e); }
      else if (c == '?') { ++i_; e = g_.optional(e); }
      else if (c == '{') {
        ++i_;
        skip();
        const int64_t lo = number();
        int64_t hi = lo;
        skip();
        if (i_ < t_.size() && t_[i_] == ',') {
          ++i_;
          skip();
          hi = i_ < t_.size() && t_[i_] == '}' ? -1 : number();
          skip();
        }
        if (i_ >= t_.size() || t_[i_] != '}') fail("expected '}'");
        if (hi >= 0 && hi < lo) fail("repetition {m,n} with n < m");
        ++i_;
        e = g_.repeat(e, lo, hi);
      } else {
        return e;
      }
      skip();
    }
  }

  uint32_t hex(size_t n) {
    uint32_t v = 0;
    for (size_t k = 0; k < n; ++k) {
      if (i_ >= t_.size()) fail("truncated escape");
      const char c = t_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f') v |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= uint32_t(c - 'A' + 10);
      else fail("bad hex digit in escape");
    }
    return v;
  }

  uint32_t character() {
    if (i_ >= t_.size()) fail("unexpected end of grammar");
    if (t_[i_] == '\\') {
      ++i_;
      if (i_ >= t_.size()) fail("trailing backslash");
      const char c = t_[i_++];
      switch (c) {
        case 'n': return '\n';
        case 't': return '\t';
        case 'r': return '\r';
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        case '\\': case '"': case '[': case ']': case '-': case '^': case '\'': return uint32_t(c);
        default: fail(std::string("unknown escape \\") + c);
      }
    }
    if (tok::utf8_valid_len(t_, i_) == 0) fail("invalid UTF-8");
    return tok::utf8_next(t_, i_);
  }

  Element atom() {
    const char c = t_[i_];
    if (c == '"') {
      ++i_;
      Sequence seq;
      while (i_ < t_.size() && t_[i_] != '"') {
        std::string utf8;
        tok::utf8_append(utf8, character());
        g_.append_literal(seq, utf8);
      }
      if (i_ >= t_.size()) fail("unterminated string literal");
      ++i_;
      return g_.alternatives("lit", {std::move(seq)});
    }
    if (c == '[') {
      ++i_;
      bool negate = false;
      if (i_ < t_.size() && t_[i_] == '^') {
        negate = true;
        ++i_;
      }
      CodePointRanges r;
      while (i_ < t_.size() && t_[i_] != ']') {
        const uint32_t lo = character();
        uint32_t hi = lo;
        if (i_ + 1 < t_.size() && t_[i_] == '-' && t_[i_ + 1] != ']') {
          ++i_;
          hi = character();
          if (hi < lo) fail("range out of order in []");
        }
        r.emplace_back(lo, hi);
      }
      if (i_ >= t_.size()) fail("unterminated [");
      ++i_;
      return code_point_set(g_, negate ? complement_ranges(r) : r, {}, "grammar");
    }
    if (c == '.') {
      ++i_;
      return code_point_set(g_, {{0, 0x10FFFF}}, {}, "grammar");
    }
    if (c == '(') {
      ++i_;
      auto alts = alternatives(true);
      if (i_ >= t_.size() || t_[i_] != ')') fail("missing ')'");
      ++i_;
      return g_.alternatives("group", std::move(alts));
    }
    if (c == '<') {
      if (t_.substr(i_, 2) != "<[") fail("expected a token reference <[id]>");
      i_ += 2;
      const int64_t id = number(int64_t(1) << 30);
      if (t_.substr(i_, 2) != "]>") fail("expected ']>' after the token id");
      i_ += 2;
      return Grammar::token(int32_t(id));
    }
    if (name_char(c)) return Grammar::ref(rule_id(rule_name()));
    fail(std::string("unexpected character '") + c + "'");
  }

  Grammar& g_;
  std::string_view t_;
  size_t i_ = 0;
  std::map<std::string, int32_t> ids_;
  std::map<std::string, bool> defined_;
};

}  // namespace

void gbnf_to_grammar(Grammar& g, std::string_view text) { GbnfParser(g, text).parse(); }

}  // namespace striker::grammar
