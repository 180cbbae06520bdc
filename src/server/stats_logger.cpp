#include "server/stats_logger.h"

#include "core/log.h"

#include <fmt/format.h>

namespace striker::server {

std::string stats_line(const EngineStats& before, const EngineStats& now, double seconds) {
  const double dt = seconds > 0 ? seconds : 1.0;
  const double prompt = double(now.prompt_tokens_total - before.prompt_tokens_total) / dt;
  const double generation = double(now.generation_tokens_total - before.generation_tokens_total) / dt;
  const std::string line = fmt::format(
      "Avg prompt throughput: {:.1f} tokens/s, Avg generation throughput: {:.1f} tokens/s, Running: {} reqs, "
      "Waiting: {} reqs, GPU KV cache usage: {:.1f}%, Prefix cache hit rate: {:.1f}%",
      prompt, generation, now.num_running, now.num_waiting, now.kv_usage * 100.0,
      100.0 * prefix_cache_hit_rate(now, before));
  // Async scheduling: how many of the interval's steps ran ahead of the previous step's tokens.
  const int64_t steps = now.async_steps - before.async_steps;
  if (steps > 0)
    return line + fmt::format(", Async: {:.1f}% of {} steps launched ahead",
                              100.0 * double(now.async_ahead_steps - before.async_ahead_steps) / double(steps), steps);
  return line;
}

std::string spec_decode_line(const EngineStats& before, const EngineStats& now, double seconds) {
  const int64_t drafts = now.spec_num_drafts - before.spec_num_drafts;
  if (now.num_speculative_tokens <= 0 || drafts <= 0) return {};
  const double dt = seconds > 0 ? seconds : 1.0;
  const int64_t drafted = now.spec_num_draft_tokens - before.spec_num_draft_tokens;
  const int64_t accepted = now.spec_num_accepted_tokens - before.spec_num_accepted_tokens;
  std::string rates;
  for (size_t i = 0; i < now.spec_accepted_per_pos.size(); ++i) {
    const int64_t was = i < before.spec_accepted_per_pos.size() ? before.spec_accepted_per_pos[i] : 0;
    rates += fmt::format("{}{:.3f}", i ? ", " : "", double(now.spec_accepted_per_pos[i] - was) / double(drafts));
  }
  // vLLM's line; the mean acceptance length counts the token every checked step adds itself.
  return fmt::format(
      "SpecDecoding metrics: Mean acceptance length: {:.2f}, Accepted throughput: {:.2f} tokens/s, Drafted "
      "throughput: {:.2f} tokens/s, Accepted: {} tokens, Drafted: {} tokens, Per-position acceptance rate: {}, Avg "
      "Draft acceptance rate: {:.1f}%",
      1.0 + double(accepted) / double(drafts), double(accepted) / dt, double(drafted) / dt, accepted, drafted, rates,
      drafted > 0 ? 100.0 * double(accepted) / double(drafted) : 0.0);
}

bool stats_idle(const EngineStats& before, const EngineStats& now, bool previous_was_idle) {
  const bool quiet = now.prompt_tokens_total == before.prompt_tokens_total &&
                     now.generation_tokens_total == before.generation_tokens_total;
  return quiet && previous_was_idle;
}

StatsLogger::StatsLogger(const Engine& engine, std::chrono::duration<double> interval)
    : engine_(engine), interval_(interval), thread_([this] { run(); }) {}

StatsLogger::~StatsLogger() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StatsLogger::run() {
  auto log = logging::get("stats");
  EngineStats before = engine_.stats();
  auto last = std::chrono::steady_clock::now();
  bool previous_quiet = true;
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stopping_; })) {
    const EngineStats now = engine_.stats();
    const auto t = std::chrono::steady_clock::now();
    const bool quiet = now.prompt_tokens_total == before.prompt_tokens_total &&
                       now.generation_tokens_total == before.generation_tokens_total;
    const auto level = stats_idle(before, now, previous_quiet) ? spdlog::level::debug : spdlog::level::info;
    const double seconds = std::chrono::duration<double>(t - last).count();
    log->log(level, stats_line(before, now, seconds));
    if (const std::string spec = spec_decode_line(before, now, seconds); !spec.empty()) log->info(spec);
    previous_quiet = quiet;
    before = now;
    last = t;
  }
}

}  // namespace striker::server
