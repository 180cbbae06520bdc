// Typed access to tokenizer.json fields. Every failure throws striker::Error with one line:
// "<file>: <json path>: <what is wrong>", e.g. "tokenizer.json: /model/merges/12: expected ...".
#pragma once
#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.h"

namespace striker::tok {

using Json = nlohmann::json;

// A JSON value together with where it came from, so errors can name it.
struct JsonRef {
  const Json& value;
  const std::string& file;
  std::string path;  // JSON pointer, "" for the root

  [[noreturn]] void fail(std::string_view what) const {
    throw Error(one_line(file + ": " + (path.empty() ? std::string("/") : path) + ": " + std::string(what)));
  }
  // Keys and token text come from the file; control characters are escaped to keep one line.
  static std::string one_line(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (unsigned char c : s) {
      if (c >= 0x20 && c != 0x7F) {
        out.push_back(static_cast<char>(c));
      } else {
        static const char* hex = "0123456789ABCDEF";
        out += "\\x";
        out.push_back(hex[c >> 4]);
        out.push_back(hex[c & 15]);
      }
    }
    return out;
  }
  bool has(std::string_view key) const {
    return value.is_object() && value.contains(key) && !value.at(std::string(key)).is_null();
  }
  JsonRef at(std::string_view key) const {
    const std::string child = path + "/" + std::string(key);
    if (!value.is_object()) fail("expected an object");
    auto it = value.find(std::string(key));
    if (it == value.end()) throw Error(one_line(file + ": " + child + ": missing field"));
    return JsonRef{*it, file, child};
  }
  JsonRef at(size_t index) const {
    if (!value.is_array() || index >= value.size()) fail("index out of range");
    return JsonRef{value[index], file, path + "/" + std::to_string(index)};
  }
  size_t array_size() const {
    if (!value.is_array()) fail("expected an array");
    return value.size();
  }
  std::string str() const {
    if (!value.is_string()) fail("expected a string");
    return value.get<std::string>();
  }
  bool boolean() const {
    if (!value.is_boolean()) fail("expected true or false");
    return value.get<bool>();
  }
  int64_t integer() const {
    if (!value.is_number_integer()) fail("expected an integer");
    return value.get<int64_t>();
  }
  // Optional fields: absent or null gives the default.
  std::string str_or(std::string_view key, std::string_view dflt) const {
    return has(key) ? at(key).str() : std::string(dflt);
  }
  bool bool_or(std::string_view key, bool dflt) const { return has(key) ? at(key).boolean() : dflt; }
  int64_t int_or(std::string_view key, int64_t dflt) const { return has(key) ? at(key).integer() : dflt; }
  // The component type; also where nesting depth is bounded, since every component factory asks.
  std::string type() const {
    if (std::count(path.begin(), path.end(), '/') > 64) fail("components are nested too deeply");
    return at("type").str();
  }
  [[noreturn]] void unsupported(std::string_view component) const {
    at("type").fail("unsupported " + std::string(component) + " type '" + type() + "'");
  }
};

}  // namespace striker::tok
