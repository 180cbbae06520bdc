#include "engine/grammar/grammar.h"

#include <algorithm>
#include <cstdio>

namespace striker::grammar {

ByteSet byte_range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  for (int b = lo; b <= hi; ++b) s.set(size_t(b));
  return s;
}

ByteSet single_byte(uint8_t b) {
  ByteSet s;
  s.set(b);
  return s;
}

void Grammar::count(size_t elements) {
  elements_ += elements;
  if (rules_.size() > limits_.max_rules || elements_ > limits_.max_elements)
    throw GrammarError("the structured output grammar is too large (more than " + std::to_string(limits_.max_rules) +
                           " rules or " + std::to_string(limits_.max_elements) +
                           " symbols); simplify the schema, pattern or grammar",
                       "size");
  if (limits_.max_build_ms > 0 && (rules_.size() & 255) == 0) {  // the clock, now and then
    const double ms = thread_cpu_ms() - started_ms_;
    if (ms > limits_.max_build_ms)
      throw GrammarError("compiling the structured output grammar took longer than " +
                             std::to_string(int64_t(limits_.max_build_ms)) + " ms; simplify the schema, pattern or grammar",
                         "size");
  }
}

int32_t Grammar::add_rule(std::string name) {
  rules_.push_back(Rule{std::move(name), {}});
  count(0);
  return int32_t(rules_.size() - 1);
}

void Grammar::add_alt(int32_t rule, Sequence alt) {
  count(alt.size() + 1);
  rules_[size_t(rule)].alts.push_back(std::move(alt));
}

Element Grammar::bytes(const ByteSet& set) {
  auto [it, added] = set_index_.emplace(set, int32_t(sets_.size()));
  if (added) sets_.push_back(set);
  return {Element::Bytes, it->second};
}

void Grammar::append_literal(Sequence& seq, std::string_view text) {
  for (unsigned char c : text) seq.push_back(bytes(single_byte(c)));
}

Element Grammar::literal(std::string_view text) {
  Sequence seq;
  append_literal(seq, text);
  return alternatives("lit", {std::move(seq)});
}

Element Grammar::alternatives(std::string name, std::vector<Sequence> alts) {
  const int32_t r = add_rule(std::move(name));
  for (auto& a : alts) add_alt(r, std::move(a));
  return ref(r);
}

Element Grammar::optional(const Element& e) { return alternatives("opt", {{e}, {}}); }

Element Grammar::star(const Element& e) {
  const int32_t r = add_rule("star");
  add_alt(r, {e, ref(r)});  // right recursion: the matcher's tail call keeps stacks flat
  add_alt(r, {});
  return ref(r);
}

Element Grammar::plus(const Element& e) { return alternatives("plus", {{e, star(e)}}); }

Element Grammar::repeat(const Element& e, int64_t min, int64_t max) {
  if (max >= 0 && max < min) throw GrammarError("repetition {" + std::to_string(min) + "," + std::to_string(max) + "} has max < min", "repeat");
  const int64_t budget = std::max<int64_t>(min, max);
  if (budget > int64_t(limits_.max_rules))
    throw GrammarError("repetition count " + std::to_string(budget) + " is too large", "size");
  Sequence seq;
  for (int64_t i = 0; i < min; ++i) seq.push_back(e);
  std::vector<int32_t> tails;  // tails[k - 1] = the rule of tail_k
  if (max < 0) {
    seq.push_back(star(e));
  } else if (max > min) {
    // tail_k ::= "" | e tail_{k-1}: at most k more
    Element tail = optional(e);
    tails.push_back(tail.index);
    for (int64_t k = 1; k < max - min; ++k) {
      tail = alternatives("rep", {{e, tail}, {}});
      tails.push_back(tail.index);
    }
    seq.push_back(tail);
  }
  const Element out = alternatives("repeat", {std::move(seq)});
  record_counted(e, min, out.index, tails);
  return out;
}

// Where the matcher can stand inside the unrolled copies: on the element itself (a byte set or
// token, at position p) or just after it (a rule, whose return address is p + 1). The last
// link of each part is the reference; a copy with c more allowed (or required) after it agrees
// with the reference on tokens of up to c - 1 bytes (one byte of slack for the element in hand).
void Grammar::record_counted(const Element& e, int64_t min, int32_t repeat_rule, const std::vector<int32_t>& tails) {
  const int32_t at = e.kind == Element::Rule ? 1 : 0;
  // Mandatory copies e_0 .. e_{min-1} in the repeat rule: in e_j, min-1-j more must follow.
  for (int64_t j = 1; j < min; ++j) {
    const int64_t agree = min - 2 - j;
    if (agree < 1) break;
    counted_.push_back({repeat_rule, 0, int32_t(j) + at, repeat_rule, 0, at, agree, e});
  }
  // tail_k ::= e tail_{k-1} | "": in its e, up to k-1 more may follow. tail_n is the reference.
  const int64_t n = int64_t(tails.size());
  for (int64_t k = 2; k < n; ++k) {
    counted_.push_back({tails[size_t(k - 1)], 0, at, tails[size_t(n - 1)], 0, at, k - 1, e});
  }
}

std::vector<char> Grammar::nullable() const {
  const size_t n = rules_.size();
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < n; ++i) {
      if (nullable[i]) continue;
      for (const auto& a : rules_[i].alts) {
        bool all = true;
        for (const auto& e : a) all = all && e.kind == Element::Rule && nullable[size_t(e.index)];
        if (all) {
          nullable[i] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

void Grammar::validate() const {
  const size_t n = rules_.size();
  if (root_ < 0 || size_t(root_) >= n) throw GrammarError("the grammar has no root rule", "grammar");
  for (const auto& r : rules_) {
    if (r.alts.empty()) throw GrammarError("rule '" + r.name + "' has no alternatives", "grammar");
    for (const auto& a : r.alts)
      for (const auto& e : a)
        if (e.kind == Element::Rule && (e.index < 0 || size_t(e.index) >= n))
          throw GrammarError("rule '" + r.name + "' refers to an undefined rule", "grammar");
  }
  const std::vector<char> nullable = this->nullable();
  // Left-corner graph: rule -> rules reachable without consuming a byte. A cycle is left recursion.
  std::vector<std::vector<int32_t>> left(n);
  for (size_t i = 0; i < n; ++i)
    for (const auto& a : rules_[i].alts)
      for (const auto& e : a) {
        if (e.kind != Element::Rule) break;
        left[i].push_back(e.index);
        if (!nullable[size_t(e.index)]) break;
      }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the DFS path, 2 done
  for (size_t start = 0; start < n; ++start) {
    if (color[start]) continue;
    std::vector<std::pair<int32_t, size_t>> stack{{int32_t(start), 0}};
    color[start] = 1;
    while (!stack.empty()) {
      auto& [r, next] = stack.back();
      if (next < left[size_t(r)].size()) {
        const int32_t c = left[size_t(r)][next++];
        if (color[size_t(c)] == 1)
          throw GrammarError("rule '" + rules_[size_t(c)].name +
                                 "' is left-recursive (it can reach itself before matching any input); rewrite it "
                                 "with right recursion or repetition",
                             "grammar");
        if (color[size_t(c)] == 0) {
          color[size_t(c)] = 1;
          stack.emplace_back(c, 0);
        }
      } else {
        color[size_t(r)] = 2;
        stack.pop_back();
      }
    }
  }
}

std::string Grammar::describe() const {
  auto set_text = [](const ByteSet& s) {
    if (s.count() == 1)
      for (int b = 0; b < 256; ++b)
        if (s.test(size_t(b))) {
          if (b >= 0x20 && b < 0x7f && b != '"' && b != '\\') return "\"" + std::string(1, char(b)) + "\"";
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02X", b);
          return "\"" + std::string(buf) + "\"";
        }
    return "[" + std::to_string(s.count()) + " bytes]";
  };
  std::string out;
  for (size_t i = 0; i < rules_.size(); ++i) {
    out += rules_[i].name + std::to_string(i) + " ::=";
    for (size_t a = 0; a < rules_[i].alts.size(); ++a) {
      if (a) out += " |";
      for (const auto& e : rules_[i].alts[a]) {
        out += " ";
        if (e.kind == Element::Bytes) out += set_text(sets_[size_t(e.index)]);
        else if (e.kind == Element::Token) out += "<[" + std::to_string(e.index) + "]>";
        else out += rules_[size_t(e.index)].name + std::to_string(e.index);
      }
      if (rules_[i].alts[a].empty()) out += " \"\"";
    }
    out += "\n";
  }
  return out;
}

namespace {

std::string encode_utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

int utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void split_same_length(Grammar& g, uint32_t lo, uint32_t hi, std::vector<Sequence>& out) {
  const int n = utf8_len(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_length(g, lo, lo | m, out);
        split_same_length(g, (lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_length(g, lo, (hi & ~m) - 1, out);
        split_same_length(g, hi & ~m, hi, out);
        return;
      }
    }
  }
  const std::string a = encode_utf8(lo), b = encode_utf8(hi);
  Sequence seq;
  for (size_t k = 0; k < a.size(); ++k) seq.push_back(g.bytes(byte_range(uint8_t(a[k]), uint8_t(b[k]))));
  out.push_back(std::move(seq));
}

}  // namespace

void utf8_range_sequences(Grammar& g, uint32_t lo, uint32_t hi, std::vector<Sequence>& out) {
  hi = std::min<uint32_t>(hi, 0x10FFFF);
  if (lo > hi) return;
  // Surrogates are not characters: cut them out.
  if (lo < 0xD800 && hi > 0xDFFF) {
    utf8_range_sequences(g, lo, 0xD7FF, out);
    utf8_range_sequences(g, 0xE000, hi, out);
    return;
  }
  if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
  if (hi >= 0xD800 && hi <= 0xDFFF) hi = 0xD7FF;
  if (lo > hi) return;
  for (uint32_t bound : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= bound && hi > bound) {
      utf8_range_sequences(g, lo, bound, out);
      utf8_range_sequences(g, bound + 1, hi, out);
      return;
    }
  }
  split_same_length(g, lo, hi, out);
}

}  // namespace striker::grammar
