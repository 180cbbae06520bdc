// OpenAI JSON shapes of the glm47 parser's output, and the finish_reason rule.
#include "chat/glm47_parser.h"

namespace striker {

std::string glm47_finish_reason(const std::string& engine_reason, bool has_tool_calls, const ToolChoice& choice) {
  const bool forced_named = choice.kind == ToolChoiceKind::Named;
  if (has_tool_calls && engine_reason == "stop" && !forced_named && choice.kind != ToolChoiceKind::None)
    return "tool_calls";
  return engine_reason;
}

nlohmann::ordered_json glm47_delta_json(const Glm47Delta& delta, bool with_reasoning_content) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (!delta.reasoning.empty()) {
    out["reasoning"] = delta.reasoning;
    if (with_reasoning_content) out["reasoning_content"] = delta.reasoning;
  }
  if (!delta.content.empty()) out["content"] = delta.content;
  if (!delta.tool_calls.empty()) {
    auto& calls = out["tool_calls"] = nlohmann::ordered_json::array();
    for (const auto& call : delta.tool_calls) {
      nlohmann::ordered_json entry;
      entry["index"] = call.index;
      nlohmann::ordered_json function = nlohmann::ordered_json::object();
      if (!call.id.empty()) {
        entry["id"] = call.id;
        entry["type"] = "function";
        function["name"] = call.name;
      }
      if (call.arguments) function["arguments"] = *call.arguments;
      entry["function"] = std::move(function);
      calls.push_back(std::move(entry));
    }
  }
  return out;
}

nlohmann::ordered_json glm47_message_json(const Glm47Message& message, bool with_reasoning_content) {
  nlohmann::ordered_json out;
  out["role"] = "assistant";
  out["content"] = message.content ? nlohmann::ordered_json(*message.content) : nullptr;
  out["refusal"] = nullptr;
  out["annotations"] = nullptr;
  out["audio"] = nullptr;
  out["function_call"] = nullptr;
  if (!message.tool_calls.empty()) {
    auto& calls = out["tool_calls"] = nlohmann::ordered_json::array();
    for (const auto& call : message.tool_calls) {
      calls.push_back({{"id", call.id},
                       {"type", "function"},
                       {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    }
  }
  out["reasoning"] = message.reasoning ? nlohmann::ordered_json(*message.reasoning) : nullptr;
  if (with_reasoning_content) out["reasoning_content"] = out["reasoning"];
  return out;
}

}  // namespace striker
