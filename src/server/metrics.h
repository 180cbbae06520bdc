// Prometheus text exposition with vLLM's metric names (reference/server.md §2.1), so routers and
// dashboards built for vLLM read striker unchanged. Gauges and token counters come from EngineStats;
// per-request histograms and the success counter are recorded here by the HTTP layer.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace striker::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  // Appends `name_bucket{le=..}`, `name_sum`, `name_count` lines with the given label text.
  void render(std::string& out, const std::string& name, const std::string& labels) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

// vLLM's 1-2-5 buckets up to max_model_len, for token-count histograms.
std::vector<double> one_two_five_buckets(int64_t max_value);

struct CacheConfigInfo {
  int32_t block_size = 16;
  std::string cache_dtype = "auto";
  double gpu_memory_utilization = 0.9;
  bool enable_prefix_caching = false;
  std::string prefix_caching_hash_algo = "sha256";
  int64_t num_gpu_blocks = 0;
};

// One finished request's phases in seconds, as vLLM defines them: queue = first scheduled - queued,
// prefill = first token - first scheduled, decode = last token - first token, inference = last token -
// first scheduled.
struct RequestPhases {
  double queue = 0, prefill = 0, decode = 0, inference = 0;
};

class ServerMetrics {
 public:
  ServerMetrics(std::string model_name, int64_t max_model_len, CacheConfigInfo cache);

  // One finished request (any endpoint). finished_reason: stop | length | abort | tool_calls.
  void record_request(const std::string& finished_reason, int64_t prompt_tokens, int64_t generation_tokens,
                      int32_t n, int64_t max_tokens, double e2e_seconds);
  void record_first_token(double seconds);
  void record_inter_token(double seconds);
  void record_phases(const RequestPhases& p);
  void record_http(const std::string& handler, int status);

  std::string render(const EngineStats& stats) const;

 private:
  mutable std::mutex mu_;
  std::string labels_;
  CacheConfigInfo cache_;
  std::map<std::string, uint64_t> success_;
  std::map<std::pair<std::string, int>, uint64_t> http_;
  Histogram ttft_, itl_, e2e_, prompt_tokens_, generation_tokens_, params_n_, params_max_tokens_;
  Histogram queue_time_, prefill_time_, decode_time_, inference_time_;
};

}  // namespace striker::server
