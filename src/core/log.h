// Logging for every part: spdlog with vLLM's line shape and level names,
//   INFO 12-01 22:43:53.123 [serve] listening on http://0.0.0.0:8000
// on stderr (stdout stays for command output such as `striker tokenize`'s JSON). spdlog and fmt
// are used header-only, so the binary needs neither .so on the GPU machine (scripts/ship_gpu.sh).
#pragma once
#include <memory>
#include <optional>
#include <string>

// Header-only fmt (Debian's spdlog already uses the external fmt, SPDLOG_FMT_EXTERNAL in its
// tweakme.h); defined here rather than on every compile line, and this header must be the first
// to include fmt or spdlog in a file.
#ifndef FMT_HEADER_ONLY
#define FMT_HEADER_ONLY 1
#endif
#ifdef SPDLOG_COMPILED_LIB
#error "striker uses spdlog header-only (no libspdlog.so on the GPU machine)"
#endif
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
