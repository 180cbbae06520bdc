// N-gram speculation (vLLM's `--speculative-config '{"method": "ngram", ...}'`, also called prompt
// lookup): guesses a sequence's next tokens by finding its last few tokens earlier in its own
// context and proposing what followed them there. No model runs: the guesses cost a scan of the
// context, and the step that checks them (one forward pass over the last token and the guesses)
// keeps every guess the model itself would have produced (engine_core.cpp).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace striker {

struct SpeculativeConfig {
  // Guessed tokens per step and sequence; 0 turns speculation off.
  int32_t num_speculative_tokens = 0;
  // The suffix matched is the longest of prompt_lookup_min .. prompt_lookup_max tokens.
  int32_t prompt_lookup_min = 5;
  int32_t prompt_lookup_max = 5;
  // No guesses while at least this many sequences run (a step of many sequences is no longer
  // bound by reading the weights, so verifying guesses costs real time); 0 = no bound.
  int32_t disable_by_batch_size = 0;
  bool enabled() const { return num_speculative_tokens > 0; }
};

// Throws striker::Error naming the field when the values cannot work.
void validate_speculative_config(const SpeculativeConfig& config);

// The tokens that followed the earliest earlier occurrence of the longest suffix of `tokens`
// whose length is in [min_n, max_n] (matches longer than max_n count as max_n long), at most
// `k` of them (fewer when the context ends first); empty when no suffix of min_n tokens recurs.
// The occurrence may overlap the suffix but is never the suffix itself. vLLM's n-gram
// proposer picks the same tokens.
std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k);

}  // namespace striker
