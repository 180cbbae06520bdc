// EngineCore's state of one request and of each of its choices (engine_core.h keeps them opaque),
// shared by the synchronous step (engine_core.cpp) and the async one (engine_core_async.cpp).
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_core.h"
#include "engine/grammar/structured_output.h"
#include "engine/thinking_budget.h"

namespace striker {

struct EngineCore::Choice {
  Request* request = nullptr;
  Sequence seq;
  PenaltyState penalties;
  std::unique_ptr<ChoiceOutput> output;
  // Structured outputs: where the choice is in its grammar, and this step's masks: one per row
  // the step draws from (row j: after the step's first j guesses), applied where `masked`.
  std::unique_ptr<grammar::GrammarMatcher> matcher;
  std::vector<std::vector<uint32_t>> masks;
  std::vector<char> masked;
  std::string mask_error;  // computing a mask failed: the request ends with this error
  // thinking_token_budget: the count in the reasoning section; a forced token is a one-token mask.
  std::optional<ThinkingBudget> budget;
  // Async scheduling: seq.tokens ends with a stand-in for the token the uncollected step draws
  // as its sample `pending_sample`.
  bool pending_token = false;
  int32_t pending_sample = -1;
};

struct EngineCore::Request {
  GenerationRequest req;
  OutputCallback on_output;
  StopRules rules;
  std::vector<int32_t> suppressed;   // masked while below min_tokens
  std::vector<int32_t> grammar_stops;  // where a grammar may end: stop_token_ids and the eos ids
  uint64_t seed = 0;
  std::vector<std::unique_ptr<Choice>> choices;
  int32_t num_finished = 0;
  std::vector<std::optional<TokenLogprob>> prompt_logprobs;
  bool prompt_logprobs_complete = false;
  bool prompt_logprobs_sent = false;
  RequestTimes times;
};

// Whether a choice's draws may need a mask: a grammar, or a thinking budget whose end may still be
// forced.
inline bool may_mask(const EngineCore::Choice& ch) { return ch.matcher || (ch.budget && !ch.budget->closed()); }

// A mask that allows `token` alone (packed bits, as grammar masks).
inline void fill_forced_mask(std::vector<uint32_t>& mask, int32_t token) {
  std::fill(mask.begin(), mask.end(), 0u);
  mask[size_t(token) >> 5] = 1u << (token & 31);
}

}  // namespace striker
