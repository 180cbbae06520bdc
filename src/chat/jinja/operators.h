// Binary arithmetic with Python semantics (int/float promotion, floor division and modulo
// signs, str/list repetition and concatenation, str % args). 64-bit ints: overflow is an error.
#pragma once
#include <string>

#include "chat/jinja/value.h"

namespace striker::jinja {

// `op` is one of + - * / // % **. Results larger than `max_bytes` are refused.
Value binary_operator(const std::string& op, const Value& l, const Value& r, size_t max_bytes);

}  // namespace striker::jinja
