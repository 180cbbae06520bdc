// Regular expressions -> grammar rules (the output must fullmatch the pattern).
// Syntax: the common subset of Python `re` / ECMAScript that JSON Schema patterns and vLLM's
// `regex` use: literals (UTF-8), `.`, classes `[a-z]` `[^...]`, escapes \d \w \s \D \W \S
// \n \t \r \f \v \xHH \uHHHH and escaped punctuation, groups `(...)`, `(?:...)`, `(?P<name>...)`,
// alternation `|`, quantifiers `* + ? {n} {n,} {n,m}` (lazy `?` suffix accepted: it changes
// nothing for a fullmatch), `^` at the start and `$` at the end. Refused with GrammarError
// (keyword "regex"): backreferences, lookaround, \b, inline flags, anchors elsewhere.
#pragma once
#include <string_view>
#include <utility>
#include <vector>

#include "engine/grammar/grammar.h"

namespace striker::grammar {

struct RegexOptions {
  // Inside a JSON string: `"` and `\` are written escaped, control characters are never
  // produced (classes skip them), so the bytes are valid JSON string content.
  bool json_string = false;
  int64_t max_repeat = 1000;  // largest {n,m} bound accepted
};

// Returns an element that matches exactly the strings the regex fullmatches.
Element regex_to_grammar(Grammar& g, std::string_view pattern, const RegexOptions& options = {});

using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive
CodePointRanges complement_ranges(const CodePointRanges& ranges);
// One code point out of `ranges`, as UTF-8 (throws GrammarError(keyword) when it is empty).
Element code_point_set(Grammar& g, const CodePointRanges& ranges, std::vector<Sequence> extra_alts = {},
                       const char* keyword = "regex");

// JSON string content for one code point `cp` (escaped where JSON needs it).
std::string json_escape_code_point(uint32_t cp);

}  // namespace striker::grammar
