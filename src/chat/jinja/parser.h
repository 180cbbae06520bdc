// Recursive-descent parser: tokens -> syntax tree, with jinja2's operator precedence.
#pragma once
#include <string>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/lexer.h"

namespace striker::jinja {

// Throws striker::Error "<origin>:<line>:<col>: ..." on a syntax error, an unknown tag,
// or an unknown filter/test name (jinja2 rejects those at compile time too).
Body parse_template(const std::vector<Token>& tokens, const std::string& origin);

}  // namespace striker::jinja
