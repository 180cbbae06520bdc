// vLLM's periodic stats line, every --log-stats-interval seconds (10 by default):
//   Avg prompt throughput: 12.3 tokens/s, Avg generation throughput: 45.6 tokens/s, Running: 2 reqs,
//   Waiting: 0 reqs, GPU KV cache usage: 3.1%[, Prefix cache hit rate: 50.0%]
// Throughputs are the engine's token counters over the interval. As vLLM does, a line on an idle
// server (no tokens in this interval or the one before) is logged at debug level only.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "engine/engine.h"

namespace striker::server {

// The line for the interval from `before` to `now`, `seconds` long. The prefix-cache rate (hits
// over queries in the interval) appears only when the engine reports a prefix cache.
std::string stats_line(const EngineStats& before, const EngineStats& now, double seconds);

// vLLM's speculation line for the interval ("SpecDecoding metrics: Mean acceptance length: ..."), or
// "" when speculation is off or checked no guess in the interval.
std::string spec_decode_line(const EngineStats& before, const EngineStats& now, double seconds);

// True when both intervals (the one ending now and the previous) saw no tokens at all.
bool stats_idle(const EngineStats& before, const EngineStats& now, bool previous_was_idle);

class StatsLogger {
 public:
  // Logs until destroyed; `engine` must outlive it.
  StatsLogger(const Engine& engine, std::chrono::duration<double> interval);
  ~StatsLogger();
  StatsLogger(const StatsLogger&) = delete;
  StatsLogger& operator=(const StatsLogger&) = delete;

 private:
  void run();

  const Engine& engine_;
  std::chrono::duration<double> interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace striker::server
