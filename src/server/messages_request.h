// Anthropic's Messages API (POST /v1/messages, what Claude Code and the Anthropic SDKs speak) on the
// chat pipeline, as vLLM and llama-server serve it: the request becomes a chat-completions request
// (system -> system message, content blocks -> chat messages, tools -> function tools, thinking ->
// enable_thinking), and the parsed chat message becomes Anthropic content blocks.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "server/json_fields.h"

namespace striker::server {

struct MessagesChatRequest {
  RequestBody chat;
  bool stream = false;
};

// Throws ApiError (400) naming the field for everything malformed or unsupported (images,
// documents, server tools, a missing max_tokens).
MessagesChatRequest messages_to_chat(const RequestBody& request);

// Anthropic's error body for an HTTP status: {"type": "error", "error": {"type", "message"}}.
nlohmann::json anthropic_error_body(int status, const std::string& message);

}  // namespace striker::server
