// `--speculative-config JSON` as vLLM reads it, for the one method striker has: n-gram guesses
// ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, ...}).
#pragma once
#include <string>

#include "engine/ngram_proposer.h"

namespace striker::cli {

// Throws striker::Error naming the key for anything striker cannot honour: other methods (draft
// models, EAGLE, MTP, suffix decoding), unknown keys, values of the wrong type or range.
SpeculativeConfig parse_speculative_config(const std::string& json);

}  // namespace striker::cli
