// The one-choice generation routes (Responses, Anthropic Messages): what they collect of their choice,
// and its non-streaming run.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "server/serving_context.h"

namespace striker::server {

struct SingleChoice {
  std::string text;
  std::vector<int32_t> tokens;
  std::optional<FinishReason> finish;
  std::optional<std::string> stop_reason;  // the engine's: a stop string, or a stop token id as text

  void add(const ChoiceDelta& d);
  FinishReason finished() const { return finish.value_or(FinishReason::Abort); }
};

// Runs `gen` (one choice) to its end, collecting choice 0 into `out` (and showing each of its deltas to
// `on_delta`, if given). False when the client left: the request is then accounted as an abort and `res`
// gets 499.
bool run_single_choice(Generation& gen, const ServingContext& ctx, RequestAccounting& acct,
                       const ConnectionWatch& watch, int64_t max_tokens, SingleChoice& out, httplib::Response& res,
                       const std::function<void(const ChoiceDelta&)>& on_delta = {});

// The client of a one-choice stream is gone (or a write failed): aborts the engine's work and accounts the
// request as an abort.
void abandon_single_choice(Generation& gen, RequestAccounting& acct, int64_t max_tokens);

// A finished text through its parser; calls after the first dropped when parallel_tool_calls is false.
ParsedMessage parse_final_message(ChoiceParser& parser, const std::string& text, bool parallel_tool_calls);

}  // namespace striker::server
