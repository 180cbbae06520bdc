// A command-line flag whose value is a JSON object (vLLM's --speculative-config, --reasoning-config).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace striker::cli {

// `text` parsed as a JSON object; anything else throws striker::Error naming `flag` (and, for a
// value that is not an object, showing `example`).
nlohmann::json parse_json_object_flag(const std::string& flag, const std::string& text, const std::string& example);

}  // namespace striker::cli
