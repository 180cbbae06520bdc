// vLLM's prompt_logprobs layout, written as JSON text: null for the first position, then per position
// {"<id>": {"logprob", "rank", "decoded_token"}} for the prompt token and the best tokens ranked 1, 2, ...
// A response holds an entry per prompt token and top token (~80 K for 4 K tokens at top 20): built as
// nlohmann objects and dumped they cost ~3-4 µs each, most of such a response's time, so the text is
// written directly and spliced into the response document at dump time.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace striker {
class Tokenizer;
}

namespace striker::server {

std::string prompt_logprobs_text(const Tokenizer& tok, const std::vector<std::optional<TokenLogprob>>& lps);

// A value written as JSON text ahead of time: the document holds raw_json_marker(i) as the value of
// `key`, and dump_with_raw_values writes texts[i] in its place (the key's quotes in the match keep a
// generated string that happens to look like a marker from ever matching).
nlohmann::json raw_json_marker(size_t i);
std::string dump_with_raw_values(const nlohmann::json& doc, const std::string& key, const std::vector<std::string>& texts);

}  // namespace striker::server
