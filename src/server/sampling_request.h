// OpenAI/vLLM request body -> SamplingParams, with vLLM's precedence: request value, then the
// server default tier (generation_config.json), then the OpenAI default. Every knob is bounded.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling_params.h"

namespace striker::server {

// The "server default" tier (generation_config.json unless --generation-config vllm).
struct SamplingDefaults {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int32_t> top_k;
  // generation_config.json eos ids after the first: vLLM appends them to every request's
  // stop_token_ids, so their stop_reason is the id (the primary EOS reports null).
  std::vector<int32_t> stop_token_ids;
};

struct RequestLimits {
  int64_t vocab_size = 0;
  int64_t max_model_len = 0;
  int32_t max_logprobs = 20;     // vLLM's default --max-logprobs
  int32_t max_n = 128;
  size_t max_stop_strings = 64;
  size_t max_stop_bytes = 1024;
  size_t max_logit_bias = 1024;
  // The engine knows where reasoning starts and ends (--reasoning-parser / --reasoning-config), so
  // a thinking_token_budget can be enforced; without it a budget is refused.
  bool reasoning_known = false;
};

enum class ApiKind { Chat, Completion };

struct SamplingRequest {
  SamplingParams params;
  std::optional<int64_t> max_tokens;  // as requested; resolved against the prompt length later
  // Without max_tokens: at most this many (completions: 16, the default of vLLM's and OpenAI's
  // CompletionRequest when the field is absent), else the context's room (chat, or an explicit null).
  std::optional<int64_t> default_max_tokens;
  bool stream = false;
  bool include_usage = false;
  bool continuous_usage = false;
  bool logprobs = false;              // chat: logprobs=true; completions: logprobs is an int
  bool echo = false;                  // completions: the choice text starts with the prompt text
  bool echo_only = false;             // echo with max_tokens 0: only the prompt is returned
  std::optional<std::string> cache_salt;  // vLLM: shares cached prefixes only with the same salt
  int32_t priority = 0;  // vLLM's scheduling priority: type-checked and echoed by /render; striker schedules FCFS
  // vLLM's return_token_ids: the prompt's ids and each choice's generated ids (the stop token
  // included, as vLLM's output.token_ids) in the response, beside the text.
  bool return_token_ids = false;
  bool return_tokens_as_token_ids = false;  // logprobs name tokens "token_id:<id>" (vLLM)
};

SamplingRequest parse_sampling_request(const nlohmann::json& body, ApiKind kind, const SamplingDefaults& defaults,
                                       const RequestLimits& limits);

// Sets params.max_tokens from the request (or the room left in the context) and rejects a prompt
// that does not fit, with vLLM's wording (both numbers, "maximum context length is").
void resolve_max_tokens(SamplingRequest& req, int64_t prompt_tokens, int64_t max_model_len);

}  // namespace striker::server
