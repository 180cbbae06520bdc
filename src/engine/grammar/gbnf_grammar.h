// GBNF (llama.cpp's grammar format, also accepted by xgrammar) -> grammar.
//
//   root   ::= "Answer: " answer "\n"?      # comments run to the end of the line
//   answer ::= [0-9]+ | "yes" | "no" | ( item ( "," item ){0,3} )
//   item   ::= [^,\n]+ | <[151352]>          # <[id]>: one whole token by id
//
// Rules are `name ::= alternatives`; names are [A-Za-z0-9_-]+. Terminals: "literals" and
// [classes] with \n \t \r \\ \" \] \- \xHH \uHHHH \UHHHHHHHH escapes (classes may be negated
// with ^ and hold ranges), `.` (any character), `<[id]>` (a token). Operators: grouping ( ),
// alternation |, repetition * + ? {m} {m,} {m,n}. Newlines are plain whitespace: a rule runs
// until the next `name ::=`. `root` is the start rule. Every rule referenced must be defined,
// and left recursion is refused (GrammarError, keyword "grammar").
#pragma once
#include <string_view>

#include "engine/grammar/grammar.h"

namespace striker::grammar {

void gbnf_to_grammar(Grammar& g, std::string_view text);

}  // namespace striker::grammar
