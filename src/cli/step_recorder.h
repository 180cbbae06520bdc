// The backend wrapper of `striker bench throughput`: every step the engine issues goes to the real
// backend unchanged — the same warm-up, and the same device sampling as `striker serve` when the
// backend samples on the device — and is timed and noted (its sequences, whether it is a pure decode
// step, the KV its decode tokens read), so decode steps are measured exactly.
#pragma once
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "model/config.h"

namespace striker::cli {

// One step as the engine issued it.
struct StepRecord {
  double seconds = 0;
  int seqs = 0;
  bool decode_only = false;  // every chunk is one generated token (position >= input_len)
  double kv_bytes = 0;       // KV the decode tokens read (decode steps only)
};

// Used only from the engine thread while the benchmark runs; steps() is read after the engine
// has finished all requests.
class StepRecorder final : public Backend {
 public:
  StepRecorder(std::unique_ptr<Backend> inner, const FlintConfig& config, int64_t input_len);
  std::string name() const override { return inner_->name(); }
  int64_t full_block_bytes(int32_t b) const override { return inner_->full_block_bytes(b); }
  int64_t sliding_block_bytes(int32_t b) const override { return inner_->sliding_block_bytes(b); }
  void allocate_kv_cache(const KvCacheSpec& spec) override { inner_->allocate_kv_cache(spec); }
  void warm_up() override { inner_->warm_up(); }
  bool samples_on_device() const override { return inner_->samples_on_device(); }
  DeviceLogprobLimits device_logprobs() const override { return inner_->device_logprobs(); }
  void forward(const ForwardBatch& batch, std::vector<float>& logits) override;
  void forward_sampled(const ForwardBatch& batch, const DeviceSampling& sampling, SampledStep& out) override;
  // Async scheduling: a launched step is timed from its launch, or from the previous step's
  // collect if that came later (the steps overlap), to its own collect.
  bool supports_async_steps() const override { return inner_->supports_async_steps(); }
  void launch_sampled(const ForwardBatch& batch, const DeviceSampling& sampling) override;
  void collect_sampled(SampledStep& out) override;
  std::vector<StepRecord> steps() const;

 private:
  using Clock = std::chrono::steady_clock;
  StepRecord describe(const ForwardBatch& batch) const;
  template <typename Step>
  void record(const ForwardBatch& batch, Step&& step);
  void push(const StepRecord& r);
  struct Launched {
    StepRecord record;
    Clock::time_point launched;
  };
  std::deque<Launched> launched_;
  Clock::time_point last_collect_{};

  std::unique_ptr<Backend> inner_;
  FlintConfig config_;
  int64_t input_len_;
  mutable std::mutex mu_;
  std::vector<StepRecord> steps_;
};

}  // namespace striker::cli
