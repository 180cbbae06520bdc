// The validated prompt and sampling of a chat or completion request. The generating routes and
// their /render twins (render_route.cpp) both start here, so a body one rejects the other rejects
// too, with the same error, and both see the same prompt token ids.
#pragma once
#include <string>
#include <vector>

#include "server/chat_request.h"
#include "server/sampling_request.h"

namespace striker::server {

struct ServingContext;

struct PreparedChat {
  ChatPrompt prompt;
  SamplingRequest sampling;  // max_tokens resolved against the prompt
};

// Checks `model`, renders the chat template and parses the sampling fields; throws ApiError.
PreparedChat prepare_chat_request(const ServingContext& ctx, const RequestBody& request);

struct PreparedCompletion {
  SamplingRequest sampling;                    // max_tokens not yet resolved (one per prompt)
  std::vector<std::vector<int32_t>> prompts;   // one token list per prompt
  std::vector<std::string> texts;              // the prompt string as sent, or a token prompt decoded
};

// What a chat-shaped request (chat, Responses, Anthropic Messages) constrains its generation with: its
// structured output (response_format, structured_outputs) or, for tool_choice required or named, the
// tool-call grammar, starting after `</think>` when the model reasons first (vLLM); and the special
// tokens kept in the text, since the parsers match them (<think>, <tool_call>, ...).
void constrain_chat_generation(const ServingContext& ctx, const nlohmann::ordered_json& body, const ChatPrompt& prompt,
                               SamplingRequest& sampling);

// Checks `model`, parses the sampling fields and every prompt (string, strings, token ids, lists
// of token ids); throws ApiError.
PreparedCompletion prepare_completion_request(const ServingContext& ctx, const RequestBody& request);

// One SamplingParams per prompt, max_tokens resolved against each (every prompt must fit, as vLLM
// checks each prompt alike).
std::vector<SamplingParams> per_prompt_params(const SamplingRequest& sampling,
                                              const std::vector<std::vector<int32_t>>& prompts,
                                              int64_t max_model_len);

}  // namespace striker::server
