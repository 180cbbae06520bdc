#include "chat/tool_schema.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "chat/tool_json.h"
#include "core/error.h"

namespace striker {

namespace {

std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string normalize_type(const std::string& type) {
  static const std::map<std::string, std::string, std::less<>> kAliases = {
      {"str", "string"},      {"text", "string"},     {"varchar", "string"}, {"char", "string"},
      {"enum", "string"},     {"int", "integer"},     {"int32", "integer"},  {"int64", "integer"},
      {"uint", "integer"},    {"uint32", "integer"},  {"uint64", "integer"}, {"long", "integer"},
      {"short", "integer"},   {"unsigned", "integer"}, {"float", "number"},  {"float32", "number"},
      {"float64", "number"},  {"double", "number"},   {"bool", "boolean"},   {"dict", "object"},
      {"arr", "array"},       {"list", "array"},      {"sequence", "array"},
  };
  const std::string key = ascii_lower(python_strip(type));
  const auto it = kAliases.find(key);
  return it == kAliases.end() ? key : it->second;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// int() and float() strip only the C-locale whitespace set (str.strip() also removes
// \x1c-\x1f, so python_strip is not the same thing here).
std::string_view number_strip(std::string_view text) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  size_t begin = 0, end = text.size();
  while (begin < end && space(text[begin])) ++begin;
  while (end > begin && space(text[end - 1])) --end;
  return text.substr(begin, end - begin);
}

// Python's digit-part grammar: digits with single underscores between them. Returns the
// position after it (== start when there is none) and appends the digits to `out`.
size_t scan_digit_part(std::string_view s, size_t i, std::string& out) {
  const size_t start = i;
  while (i < s.size() && is_digit(s[i])) {
    out.push_back(s[i++]);
    if (i + 1 < s.size() && s[i] == '_' && is_digit(s[i + 1])) ++i;
  }
  return i == start ? start : i;
}

// Python int(value): the canonical decimal text, or nullopt. Arbitrary size, like Python.
std::optional<std::string> python_int(std::string_view value) {
  const std::string_view s = number_strip(value);
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  std::string digits;
  const size_t end = scan_digit_part(s, i, digits);
  if (digits.empty() || end != s.size()) return std::nullopt;
  const size_t nonzero = digits.find_first_not_of('0');
  if (nonzero == std::string::npos) return std::string("0");
  return (negative ? "-" : "") + digits.substr(nonzero);
}

// Python float(value), or nullopt when the text is not a float literal.
std::optional<double> python_float(std::string_view value) {
  const std::string_view s = number_strip(value);
  size_t i = 0;
  std::string clean;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean.push_back(s[i++]);
  const std::string word = ascii_lower(s.substr(i));
  if (word == "inf" || word == "infinity") return clean == "-" ? -HUGE_VAL : HUGE_VAL;
  if (word == "nan") return std::nan("");
  size_t before = clean.size();
  i = scan_digit_part(s, i, clean);
  bool any_digits = clean.size() > before;
  if (i < s.size() && s[i] == '.') {
    clean.push_back('.');
    before = clean.size();
    i = scan_digit_part(s, i + 1, clean);
    any_digits = any_digits || clean.size() > before;
  }
  if (!any_digits) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    clean.push_back('e');
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean.push_back(s[i++]);
    before = clean.size();
    i = scan_digit_part(s, i, clean);
    if (clean.size() == before) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  // strtod honours the C locale, which this program never changes; ERANGE gives
  // +-HUGE_VAL or 0 exactly as Python's float() does.
  return std::strtod(clean.c_str(), nullptr);
}

// Python int(x) of an integral double, as decimal text (exact even beyond 64 bits).
std::string integral_double_text(double value) {
  if (std::fabs(value) < 9.2e18) return std::to_string(static_cast<int64_t>(value));
  char buf[400];
  std::snprintf(buf, sizeof buf, "%.0f", value);
  return buf;
}

// json.loads(value) re-serialized, non-finite numbers rejected (vLLM's _is_json_finite).
std::optional<TypedValue> python_json_loads(const std::string& value) {
  auto parsed = python_json_roundtrip(value);
  if (!parsed) return std::nullopt;
  return TypedValue{std::move(parsed->text), parsed->is_string};
}

}  // namespace

std::optional<std::set<std::string>> ToolSchema::property_types(const std::string& key) const {
  if (!properties.is_object() || !properties.contains(key)) return std::nullopt;
  std::set<std::string> out;
  for (const auto& type : schema_types(properties.at(key))) out.insert(normalize_type(type));
  return out;
}

ToolSet ToolSet::from_request(const nlohmann::json& tools) {
  ToolSet set;
  if (tools.is_null()) return set;
  if (!tools.is_array()) throw Error("tools: expected an array of tool definitions");
  for (size_t i = 0; i < tools.size(); ++i) {
    const auto& tool = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) throw Error(where + ": expected an object");
    // Chat Completions nests the definition under "function"; the Responses API does not.
    const auto& def = tool.contains("function") ? tool.at("function") : tool;
    if (!def.is_object() || !def.contains("name") || !def.at("name").is_string())
      throw Error(where + ".function.name: expected a string");
    ToolSchema schema{def.at("name").get<std::string>(), nullptr};
    if (def.contains("parameters") && def.at("parameters").is_object() &&
        def.at("parameters").contains("properties"))
      schema.properties = def.at("parameters").at("properties");
    set.tools_.push_back(std::move(schema));
  }
  return set;
}

const ToolSchema* ToolSet::find(std::string_view name) const {
  for (const auto& tool : tools_) {
    if (tool.name == name) return &tool;
  }
  return nullptr;
}

ToolChoice parse_tool_choice(const nlohmann::json& tool_choice, const nlohmann::json& tools) {
  const bool has_tools = tools.is_array();
  if (has_tools && tools.empty())
    throw Error("`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.");
  if (tool_choice.is_null()) return {has_tools ? ToolChoiceKind::Auto : ToolChoiceKind::None, ""};
  if (tool_choice.is_string() && tool_choice.get<std::string>() == "none") return {ToolChoiceKind::None, ""};
  if (!has_tools) throw Error("When using `tool_choice`, `tools` must be set.");
  if (tool_choice.is_string()) {
    const auto value = tool_choice.get<std::string>();
    if (value == "auto") return {ToolChoiceKind::Auto, ""};
    if (value == "required") return {ToolChoiceKind::Required, ""};
    throw Error("Invalid value for `tool_choice`: " + value +
                "! Only named tools, \"none\", \"auto\" or \"required\" are supported.");
  }
  const char* usage = " Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`";
  if (!tool_choice.is_object() || !tool_choice.contains("function") || !tool_choice.at("function").is_object())
    throw Error(std::string("Expected field `function` in `tool_choice`.") + usage);
  const auto& function = tool_choice.at("function");
  if (!function.contains("name") || !function.at("name").is_string() || function.at("name").get<std::string>().empty())
    throw Error(std::string("Expected field `name` in `function` in `tool_choice`.") + usage);
  const auto name = function.at("name").get<std::string>();
  if (ToolSet::from_request(tools).find(name) == nullptr)
    throw Error("The tool specified in `tool_choice` does not match any of the specified `tools`");
  return {ToolChoiceKind::Named, name};
}

namespace {

// Branches nested deeper than this are ignored (a request could nest anyOf arbitrarily).
constexpr int kMaxSchemaDepth = 32;

std::set<std::string> schema_types_at(const nlohmann::json& schema, int depth) {
  std::set<std::string> types;
  if (!schema.is_object()) return {"string"};
  if (schema.contains("type")) {
    const auto& type = schema.at("type");
    if (type.is_string()) types.insert(type.get<std::string>());
    if (type.is_array()) {
      for (const auto& t : type) {
        if (t.is_string()) types.insert(t.get<std::string>());
      }
    }
  }
  if (schema.contains("enum") && schema.at("enum").is_array()) {
    for (const auto& v : schema.at("enum")) {
      if (v.is_null()) types.insert("null");
      else if (v.is_boolean()) types.insert("boolean");
      else if (v.is_number_integer()) types.insert("integer");
      else if (v.is_number_float()) types.insert("number");
      else if (v.is_string()) types.insert("string");
      else if (v.is_array()) types.insert("array");
      else if (v.is_object()) types.insert("object");
    }
  }
  for (const char* branch : {"anyOf", "oneOf", "allOf"}) {
    if (schema.contains(branch) && schema.at(branch).is_array()) {
      if (depth >= kMaxSchemaDepth) continue;
      for (const auto& choice : schema.at(branch)) types.merge(schema_types_at(choice, depth + 1));
    }
  }
  if (types.empty()) types.insert("string");
  return types;
}

}  // namespace

std::set<std::string> schema_types(const nlohmann::json& schema) { return schema_types_at(schema, 0); }

TypedValue string_value(const std::string& value) { return {python_json_string(value), true}; }

TypedValue coerce_to_schema_types(const std::string& value, const std::set<std::string>& raw_types) {
  std::set<std::string> types;
  for (const auto& t : raw_types) types.insert(normalize_type(t));
  for (const char* candidate : {"null", "integer", "number", "boolean", "object", "array", "string"}) {
    if (!types.count(candidate)) continue;
    const std::string_view kind = candidate;
    if (kind == "null") {
      if (ascii_lower(value) == "null") return {"null", false};
    } else if (kind == "string") {
      return string_value(value);
    } else if (kind == "integer") {
      if (auto text = python_int(value)) return {*text, false};
    } else if (kind == "number") {
      const auto number = python_float(value);
      if (number && std::isfinite(*number)) {
        if (*number == std::trunc(*number)) return {integral_double_text(*number), false};
        return {python_float_repr(*number), false};
      }
    } else if (kind == "boolean") {
      const std::string lower = ascii_lower(python_strip(value));
      if (lower == "true" || lower == "1") return {"true", false};
      if (lower == "false" || lower == "0") return {"false", false};
    } else {  // object, array: whatever json.loads returns is accepted, as in vLLM
      if (auto parsed = python_json_loads(value)) return *parsed;
    }
  }
  if (auto parsed = python_json_loads(value)) return *parsed;
  return string_value(value);
}

}  // namespace striker
