// JSON parsing for untrusted checkpoint files: nlohmann's parser, but through a SAX builder
// that rejects duplicate keys (nlohmann would silently keep the last one) and nesting deeper
// than the format needs, so a hostile file cannot make us build huge or deep trees.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace striker {

struct JsonLimits {
  size_t max_depth = 8;            // containers nested inside each other
  size_t max_array_items = 1024;   // elements in any one array
};

// Parses `text`; throws striker::Error "<source>: ..." on invalid JSON or a broken limit.
nlohmann::json parse_json_strict(std::string_view text, const std::string& source, const JsonLimits& limits = {});

// `s` made safe for a one-line error message: control and non-ASCII bytes shown as \xNN,
// cut to `max_chars` with "..." appended, wrapped in single quotes.
std::string quote(std::string_view s, size_t max_chars = 120);

}  // namespace striker
