// Splits Jinja template source into text and tag tokens, applying jinja2's whitespace
// control as Hugging Face configures it (trim_blocks and lstrip_blocks on, `-`/`+` markers).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace striker::jinja {

enum class Tok { Text, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Int, Float, Op, Eof };

struct Token {
  Tok type;
  std::string text;  // Text content, name, operator, or decoded string literal
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
  int col = 1;
};

// jinja2 also normalises every line break to "\n" and drops one trailing newline.
std::string normalize_template_source(const std::string& source);

// Throws striker::Error "<origin>:<line>:<col>: ..." on malformed input.
std::vector<Token> tokenize_template(const std::string& normalized_source, const std::string& origin);

}  // namespace striker::jinja
