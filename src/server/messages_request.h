// Anthropic's Messages API (POST /v1/messages, what Claude Code and the Anthropic SDKs speak) on the
// chat pipeline, as vLLM and llama-server serve it: the request becomes a chat-completions request
// (system -> system message, content blocks -> chat messages, tools -> function tools, thinking ->
// enable_thinking), and the parsed chat message becomes Anthropic content blocks.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/json_fields.h"

namespace striker::server {

struct MessagesChatRequest {
  RequestBody chat;
  bool stream = false;
  std::optional<int64_t> thinking_budget;  // thinking.budget_tokens (the chat's thinking_token_budget)
};

// Throws ApiError (400) naming the field for everything malformed or unsupported (images,
// documents, server tools, a missing max_tokens, a thinking budget not below max_tokens).
// `generating` false (count_tokens): the prompt alone matters, so the budget is checked but not
// held against max_tokens nor passed on.
MessagesChatRequest messages_to_chat(const RequestBody& request, bool generating = true);

// Anthropic's error body for an HTTP status: {"type": "error", "error": {"type", "message"}}.
nlohmann::json anthropic_error_body(int status, const std::string& message);

}  // namespace striker::server
