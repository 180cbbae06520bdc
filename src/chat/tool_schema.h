// The request's tools and tool_choice as the output parsers need them, and vLLM's
// schema-driven typing of tool-call argument values (reference/chat-format.md §2.3, §4).
#pragma once
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace striker {

// One declared function: its name and its `parameters.properties` (null when absent).
struct ToolSchema {
  std::string name;
  nlohmann::json properties;

  // vLLM types arguments only for tools whose parameters have a non-empty `properties`.
  bool has_properties() const { return properties.is_object() && !properties.empty(); }
  // Normalized type names of one declared property (aliases such as "int" -> "integer"
  // applied); nullopt for a key the schema does not declare.
  std::optional<std::set<std::string>> property_types(const std::string& key) const;
};

class ToolSet {
 public:
  ToolSet() = default;
  // The request's `tools` (null or an array). Accepts the chat form
  // {"type":"function","function":{"name":..,"parameters":..}} and the flat Responses form
  // {"type":"function","name":..,"parameters":..}. Throws striker::Error naming the bad entry.
  static ToolSet from_request(const nlohmann::json& tools);

  bool empty() const { return tools_.empty(); }
  const ToolSchema* find(std::string_view name) const;
  // vLLM's validate_tool_names: the name is declared, or the request declared no tools.
  bool accepts_name(std::string_view name) const { return tools_.empty() || find(name) != nullptr; }

 private:
  std::vector<ToolSchema> tools_;
};

enum class ToolChoiceKind { None, Auto, Required, Named };

struct ToolChoice {
  ToolChoiceKind kind = ToolChoiceKind::None;
  std::string function_name;  // for Named
};

// The request's `tool_choice` with vLLM's defaulting and validation (§4.2): absent means
// "auto" when tools are given, "none" otherwise. Bad values throw striker::Error with vLLM's
// message text (the server answers them with HTTP 400, param "tool_choice").
ToolChoice parse_tool_choice(const nlohmann::json& tool_choice, const nlohmann::json& tools);

// All type names a property schema allows: `type` (string or list), the kinds of `enum`
// values, and anyOf/oneOf/allOf branches recursively; {"string"} when none is found.
std::set<std::string> schema_types(const nlohmann::json& schema);

// A value after typing: its JSON text (Python json.dumps form) and whether it is a string.
struct TypedValue {
  std::string json;
  bool is_string = false;
};

// vLLM's coerce_to_schema_type: tries null > integer > number > boolean > object > array >
// string among `types` (normalized names), then a plain JSON parse, else keeps the raw text.
TypedValue coerce_to_schema_types(const std::string& value, const std::set<std::string>& types);

// A raw argument value kept as a JSON string.
TypedValue string_value(const std::string& value);

}  // namespace striker
