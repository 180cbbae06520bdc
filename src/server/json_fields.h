// Typed, range-checked reads of one JSON request object. JSON null counts as "absent" (as pydantic
// Optional fields do); a wrong type or an out-of-range value is a 400 naming the field.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace striker::server {

// A request's JSON body, parsed in the client's key order (`ordered`: vLLM's Python dicts keep
// it) and copied into sorted maps (`fields`) for the field reads. The order shows in the output
// through what is read from `ordered`: JSON schemas (properties are generated in their order),
// tools and messages (the chat template renders them in it).
struct RequestBody {
  nlohmann::ordered_json ordered;
  nlohmann::json fields;
};

class JsonFields {
 public:
  explicit JsonFields(const nlohmann::json& object) : obj_(object) {}

  bool has(const char* name) const;
  const nlohmann::json* get(const char* name) const;  // nullptr when absent or null

  std::optional<double> number(const char* name, double lo, double hi) const;
  std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi) const;
  std::optional<bool> boolean(const char* name) const;
  std::optional<std::string> string(const char* name) const;
  // An object (for chat_template_kwargs, stream_options, ...).
  const nlohmann::json* object(const char* name) const;
  const nlohmann::json* array(const char* name) const;

 private:
  const nlohmann::json& obj_;
};

// Describes a JSON value's type in errors ("string", "integer", ...).
std::string json_type_name(const nlohmann::json& v);

// Reads inside request items kept in the client's key order (the Responses and Messages conversions):
// `where` names the item in errors ("input[2]"), `param` is the top-level field the 400 names.
std::string item_path(const std::string& where, size_t index);  // where[index]
const nlohmann::ordered_json* item_field(const nlohmann::ordered_json& obj, const char* name);  // null: absent or null
std::string required_item_string(const nlohmann::ordered_json& obj, const char* name, const std::string& where,
                                 const char* param);

}  // namespace striker::server
