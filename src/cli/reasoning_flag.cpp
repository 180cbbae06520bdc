#include "cli/reasoning_flag.h"

#include "cli/json_flag.h"
#include "core/error.h"

namespace striker::cli {

ReasoningStrings parse_reasoning_config(const std::string& text) {
  const nlohmann::json j = parse_json_object_flag(
      "--reasoning-config", text, R"({"reasoning_start_str": "<think>", "reasoning_end_str": "</think>"})");
  ReasoningStrings out;
  for (const auto& [key, value] : j.items()) {
    std::string* field = key == "reasoning_start_str" ? &out.start : key == "reasoning_end_str" ? &out.end : nullptr;
    if (!field)
      throw Error("--reasoning-config: '" + key + "' is not taken (it takes reasoning_start_str and reasoning_end_str; "
                  "the parser is --reasoning-parser)");
    if (value.is_null()) continue;
    if (!value.is_string()) throw Error("--reasoning-config: " + key + " must be a string, got " + value.dump());
    *field = value.get<std::string>();
  }
  return out;
}

ReasoningDelimiters resolve_reasoning_delimiters(const ReasoningStrings& config, const std::string& reasoning_parser,
                                                 const Tokenizer& tokenizer) {
  ReasoningStrings s = config;
  // glm45 and glm47 (the parsers this build has) reason between <think> and </think>.
  if (!reasoning_parser.empty()) {
    if (s.start.empty()) s.start = "<think>";
    if (s.end.empty()) s.end = "</think>";
  }
  if (s.start.empty() && s.end.empty()) return {};
  if (s.start.empty() || s.end.empty())
    throw Error("--reasoning-config needs both reasoning_start_str and reasoning_end_str (or a --reasoning-parser "
                "to take the other from)");
  ReasoningDelimiters d{tokenizer.encode(s.start, false), tokenizer.encode(s.end, false)};
  if (d.start.empty() || d.end.empty())
    throw Error("--reasoning-config: '" + (d.start.empty() ? s.start : s.end) +
                "' is no token of this model's vocabulary (it tokenizes to nothing)");
  return d;
}

}  // namespace striker::cli
