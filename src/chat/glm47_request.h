// From an OpenAI chat request (JSON body) and the server's flags to the glm47 parser's
// options, with vLLM's rules for thinking, tools and tool_choice (chat-format.md §1.5, §2.2, §4).
#pragma once
#include <nlohmann/json.hpp>

#include "chat/glm47_parser.h"

namespace striker {

struct Glm47ServerFlags {
  bool reasoning_parser = true;     // --reasoning-parser glm47
  bool tool_parser = true;          // --tool-call-parser glm47
  bool auto_tool_choice = true;     // --enable-auto-tool-choice
  // tool_choice "none": drop tool-call markup the model still writes (vLLM's engine parser),
  // or keep it as content (older vLLM; easier to debug).
  bool drop_tool_markup_when_none = true;
  nlohmann::json default_chat_template_kwargs = nlohmann::json::object();  // --default-chat-template-kwargs
};

// The chat_template_kwargs the template and the parser see: server defaults, overridden by
// the request's, plus enable_thinking = (reasoning_effort != "none") when the request sets
// reasoning_effort but not enable_thinking. Throws striker::Error when a field has the wrong type.
nlohmann::json effective_chat_template_kwargs(const nlohmann::json& request, const nlohmann::json& server_defaults);

// Parser options for one request: thinking from the effective kwargs (off entirely without a
// reasoning parser), tools and tool_choice validated as vLLM does (striker::Error with
// vLLM's message on misuse, e.g. "auto" without --enable-auto-tool-choice),
// include_reasoning and parallel_tool_calls.
Glm47ParserOptions glm47_options_from_request(const nlohmann::json& request, const Glm47ServerFlags& flags);

}  // namespace striker
