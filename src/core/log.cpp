#include "core/log.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "core/error.h"

namespace striker::logging {
namespace {

// %* in the pattern: the level as Python's logging names it (INFO, WARNING, ...), as vLLM prints.
class VllmLevelFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    static constexpr const char* kNames[] = {"TRACE", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "OFF"};
    const std::string_view name = kNames[std::clamp(int(msg.level), 0, 6)];
    dest.append(name.data(), name.data() + name.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<VllmLevelFlag>(); }
};

std::unique_ptr<spdlog::formatter> vllm_formatter() {
  auto f = std::make_unique<spdlog::pattern_formatter>();
  f->add_flag<VllmLevelFlag>('*').set_pattern("%^%*%$ %m-%d %H:%M:%S.%e [%n] %v");
  return f;
}

std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace

Level parse_level(const std::string& name, const std::string& source) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (lower == "debug") return Level::debug;
  if (lower == "info") return Level::info;
  if (lower == "warning" || lower == "warn") return Level::warn;
  if (lower == "error") return Level::err;
  if (lower == "critical") return Level::critical;
  throw Error(source + " must be one of debug, info, warning, error, critical; got '" + name + "'");
}

Level level_from(const std::optional<std::string>& flag) {
  if (flag) return parse_level(*flag, "--log-level");
  if (const char* env = std::getenv("VLLM_LOGGING_LEVEL"); env && *env) return parse_level(env, "VLLM_LOGGING_LEVEL");
  return Level::info;
}

void configure(Level level) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  spdlog::set_formatter(vllm_formatter());
  spdlog::set_level(level);
}

std::shared_ptr<spdlog::logger> get(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  if (auto existing = spdlog::get(name)) return existing;
  // Registered loggers take the registry's level and formatter; the first one sets vLLM's
  // format even when configure() was never called (unit tests).
  static const bool formatted = [] {
    spdlog::set_formatter(vllm_formatter());
    return true;
  }();
  (void)formatted;
  return spdlog::stderr_color_mt(name);
}

}  // namespace striker::logging
