// `--reasoning-config JSON` as vLLM reads it ({"reasoning_start_str": "<think>", "reasoning_end_str":
// "</think>"}), and the reasoning delimiters a request's thinking_token_budget counts by: the
// config's strings, else the --reasoning-parser's (glm45/glm47: `<think>` and `</think>`).
#pragma once
#include <string>

#include "engine/thinking_budget.h"
#include "tokenizer/tokenizer.h"

namespace striker::cli {

struct ReasoningStrings {
  std::string start, end;  // empty: not given
};

// Throws striker::Error naming the key for unknown keys and values that are not strings.
ReasoningStrings parse_reasoning_config(const std::string& json);

// The strings tokenized; a string the config leaves out comes from the reasoning parser. Neither a
// config nor a parser: none (budgets are refused). Throws when only one delimiter is known or a
// string tokenizes to nothing.
ReasoningDelimiters resolve_reasoning_delimiters(const ReasoningStrings& config, const std::string& reasoning_parser,
                                                 const Tokenizer& tokenizer);

}  // namespace striker::cli
