#include "chat/glm47_request.h"

#include "core/error.h"

namespace striker {

namespace {

const nlohmann::json& field_or_null(const nlohmann::json& obj, const char* key) {
  static const nlohmann::json kNull;
  return obj.is_object() && obj.contains(key) ? obj.at(key) : kNull;
}

bool bool_field(const nlohmann::json& request, const char* key, bool fallback) {
  const auto& v = field_or_null(request, key);
  if (v.is_null()) return fallback;
  if (!v.is_boolean()) throw Error(std::string(key) + ": expected a boolean");
  return v.get<bool>();
}

}  // namespace

nlohmann::json effective_chat_template_kwargs(const nlohmann::json& request, const nlohmann::json& server_defaults) {
  nlohmann::json kwargs = server_defaults.is_object() ? server_defaults : nlohmann::json::object();
  const auto& from_request = field_or_null(request, "chat_template_kwargs");
  if (!from_request.is_null() && !from_request.is_object()) throw Error("chat_template_kwargs: expected an object");
  if (from_request.is_object()) {
    for (const auto& [key, value] : from_request.items()) kwargs[key] = value;
  }
  const auto& effort = field_or_null(request, "reasoning_effort");
  if (!effort.is_null()) {
    if (!effort.is_string()) throw Error("reasoning_effort: expected a string");
    if (!(from_request.is_object() && from_request.contains("enable_thinking")))
      kwargs["enable_thinking"] = effort.get<std::string>() != "none";
  }
  return kwargs;
}

Glm47ParserOptions glm47_options_from_request(const nlohmann::json& request, const Glm47ServerFlags& flags) {
  Glm47ParserOptions options;
  const auto kwargs = effective_chat_template_kwargs(request, flags.default_chat_template_kwargs);
  // Without a reasoning parser nothing is split: the think markers are plain content.
  options.thinking = flags.reasoning_parser && glm47_thinking_enabled(kwargs);
  options.include_reasoning = bool_field(request, "include_reasoning", true);
  options.parallel_tool_calls = bool_field(request, "parallel_tool_calls", true);
  const auto& tools = field_or_null(request, "tools");
  options.tool_choice = parse_tool_choice(field_or_null(request, "tool_choice"), tools);
  options.tools = ToolSet::from_request(tools);
  options.tool_parser_enabled = flags.tool_parser;
  options.drop_tool_markup_when_none = flags.drop_tool_markup_when_none;
  const auto kind = options.tool_choice.kind;
  // The serving-layer checks of vLLM (chat_completion/serving.py).
  if (kind == ToolChoiceKind::Auto && !(flags.auto_tool_choice && flags.tool_parser))
    throw Error("\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set");
  if (kind == ToolChoiceKind::Required && !flags.tool_parser)
    throw Error("tool_choice=\"required\" requires --tool-call-parser to be set");
  if (kind == ToolChoiceKind::Named && !flags.tool_parser)
    throw Error("tool_choice=function \"" + options.tool_choice.function_name +
                "\" requires --tool-call-parser to be set");
  return options;
}

}  // namespace striker
