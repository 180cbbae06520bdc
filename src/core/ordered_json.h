// JSON text to nlohmann::ordered_json in time linear in the number of keys.
//
// ordered_json keeps keys in insertion order (what Python's json.loads gives vLLM), but its map
// finds a key by scanning, so ordered_json::parse is quadratic in the keys of one object: a 1 MB
// request with one 100,000-key object takes 17 s. This parser indexes the keys of each large
// object while it is built. A repeated key keeps its first position and takes the last value,
// as in Python (and in ordered_json::parse).
#pragma once
#include <string_view>

#include <nlohmann/json.hpp>

namespace striker {

// Throws nlohmann::json::parse_error on malformed text, as ordered_json::parse does.
nlohmann::ordered_json parse_ordered_json(std::string_view text);

}  // namespace striker
