// JSON text exactly as Python's json.dumps(..., ensure_ascii=False) writes it: ", " and ": "
// separators, non-ASCII kept literally, floats in repr() form. vLLM builds tool-call
// `arguments` with json.dumps, so clients that compare strings see the same bytes.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace striker {

// Valid UTF-8 copy of `text`: every byte that does not start a well-formed sequence becomes
// U+FFFD (as a Python decode with errors="replace" would show it).
std::string utf8_sanitize(std::string_view text);

// Length of the longest prefix of `text` that does not end inside an incomplete (but so far
// well-formed) multi-byte sequence. Used to hold back a code point split across deltas.
size_t utf8_complete_prefix(std::string_view text);

// A JSON string literal with Python's escapes (\" \\ \n \r \t \b \f, \u00XX for other
// control characters); invalid UTF-8 is replaced first.
std::string python_json_string(std::string_view text);

// repr(float): shortest round-trip digits, fixed notation for exponents in [-4, 16),
// scientific ("1e-05", "1.5e+16") otherwise, ".0" kept on integral values.
std::string python_float_repr(double value);

// json.dumps(json.loads(text), ensure_ascii=False), or nullopt where json.loads fails or the
// value holds inf/nan (vLLM rejects those). Integers keep every digit, floats take repr()
// form, key order is kept and a repeated key keeps its first position with the last value.
struct PythonJsonValue {
  std::string text;
  bool is_string = false;  // the value is a JSON string
};
std::optional<PythonJsonValue> python_json_roundtrip(std::string_view text);

// Python's str.isspace() for the ASCII range (what `\s` and str.strip() remove here).
bool python_is_space(char c);
std::string_view python_strip(std::string_view text);

}  // namespace striker
