// Per-request sampling parameters (OpenAI + vLLM extras). Plain data; validated by the server.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace striker {

namespace grammar {
struct CompiledGrammar;
}

// Structured outputs (JSON schema, regex, choice, grammar, forced tool calls): the compiled
// grammar every choice's tokens must follow, from the token after `start_after_token` on
// (the reasoning end `</think>`; -1: from the first token).
struct StructuredConstraint {
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  int32_t start_after_token = -1;
};

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy
  float top_p = 1.0f;
  int32_t top_k = 0;                // 0 or -1 = off
  float min_p = 0.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  std::map<int32_t, float> logit_bias;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;    // stop strings, excluded from the output unless:
  bool include_stop_str_in_output = false;  // vLLM: keep the matched stop string (text ends after it)
  std::vector<int32_t> stop_token_ids;  // in addition to the model's eos ids
  bool ignore_eos = false;
  int32_t max_tokens = 16;
  int32_t min_tokens = 0;
  std::optional<int32_t> logprobs;        // top-N logprobs per sampled token (0 = just the token)
  std::optional<int32_t> prompt_logprobs;
  bool skip_special_tokens = true;
  int32_t n = 1;
  std::optional<StructuredConstraint> structured;
  // vLLM's thinking_token_budget: at most this many tokens inside the reasoning section, then its
  // end is forced (engine/thinking_budget.h). Needs EngineConfig::reasoning.
  std::optional<int32_t> thinking_token_budget;
};

}  // namespace striker
