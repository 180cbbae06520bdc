// Validation of a chat request's messages / tools / tool_choice and the prompt it renders to.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/choice_parser.h"
#include "server/json_fields.h"
#include "server/server_options.h"

namespace striker {
class ChatTemplate;
class Tokenizer;
}  // namespace striker

namespace striker::server {

struct ChatPrompt {
  std::vector<int32_t> tokens;
  ParserSettings parser;          // per-choice parser configuration
  bool include_reasoning = true;
  bool parallel_tool_calls = true;
};

// Throws ApiError (400) for every malformed field, naming it. The messages and tools are
// rendered in the request's key order (vLLM hands the template Python dicts, which keep it).
ChatPrompt build_chat_prompt(const RequestBody& request, const ServerOptions& options, const ChatTemplate& tmpl,
                             const Tokenizer& tokenizer);

// Effective template kwargs: server defaults, then the request's chat_template_kwargs, then
// reasoning_effort "none" -> enable_thinking false.
nlohmann::json effective_template_kwargs(const nlohmann::json& body, const ServerOptions& options);

}  // namespace striker::server
