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

// Appends `key: value` to an object without looking for `key` first (ordered_json's operator[]
// scans every key, so filling an object with it is quadratic). The caller knows `key` is new.
void append_new_key(nlohmann::ordered_json& object, const std::string& key, nlohmann::ordered_json value);

// `into[k] = v` for every member of the object `from`, in time linear in both: a key `into`
// has keeps its place and takes the new value, the others are appended in `from`'s order.
void merge_keys(nlohmann::ordered_json& into, const nlohmann::ordered_json& from);

}  // namespace striker
