// Logging for every part: spdlog with vLLM's line shape and level names,
//   INFO 12-01 22:43:53.123 [serve] listening on http://0.0.0.0:8000
// on stderr (stdout stays for command output such as `striker tokenize`'s JSON). spdlog and fmt
// are Debian's compiled libraries (CMakeLists.txt says why).
#pragma once
#include <memory>
#include <optional>
#include <string>

#include <spdlog/spdlog.h>

namespace striker::logging {

using Level = spdlog::level::level_enum;

// vLLM's names in any case: debug | info | warning (warn) | error | critical. Anything else is a
// striker::Error naming `source` (the flag or environment variable it came from).
Level parse_level(const std::string& name, const std::string& source);

// The level to run at: `flag` (--log-level) when given, else VLLM_LOGGING_LEVEL, else info.
Level level_from(const std::optional<std::string>& flag);

// Sets the level and vLLM's line format for every logger, existing and future.
void configure(Level level);

// The logger of one part ("serve", "engine", "http", ...), created on first use with the
// configured level and format; safe from any thread.
std::shared_ptr<spdlog::logger> get(const std::string& name);

}  // namespace striker::logging
