// OpenAI's Responses API (POST /v1/responses) on top of the chat pipeline: a Responses request
// becomes the chat-completions request the chat route validates, renders and constrains (as
// llama-server does; vLLM converts input items to chat messages the same way for non-harmony
// models), and the parsed chat message becomes Responses output items.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "server/json_fields.h"

namespace striker::server {

struct ResponsesChatRequest {
  RequestBody chat;  // for prepare_chat_request and the structured-output parsing
  // The chat messages of the conversation after the instructions (the previous response's
  // conversation, its output, then this input): what a later previous_response_id continues.
  nlohmann::ordered_json conversation = nlohmann::ordered_json::array();
  bool stream = false;
  bool store = true;
  // include: ["message.output_text.logprobs"]: each output_text part carries the logprobs of the tokens
  // that wrote it (top_logprobs alternatives each), as vLLM serves them.
  bool output_logprobs = false;
};

// Throws ApiError (400) naming the Responses field for everything malformed or unsupported
// (non-function tools, image or file inputs, item references). `previous` is the
// stored conversation of previous_response_id (the caller looks it up: 404 when unknown).
ResponsesChatRequest responses_to_chat(const RequestBody& request, const nlohmann::ordered_json* previous);

// The assistant chat message(s) of a response's output items (reasoning, message, function_call),
// appended to a stored conversation so a later turn renders them as history.
void append_output_as_messages(const nlohmann::ordered_json& output, nlohmann::ordered_json& conversation);

}  // namespace striker::server
