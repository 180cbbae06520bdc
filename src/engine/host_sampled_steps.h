// Async scheduling on a backend that returns logits rows (the CPU reference): wraps it into one
// that draws the tokens itself, with the engine's reference sampler (engine/sampler.h, so the
// draws are the engine's own), and runs launched steps in launch order on a worker thread. The
// engine's bookkeeping of step n (stops, detokenizing, outputs, the next plan) then overlaps the
// forward pass of step n + 1, as it overlaps the GPU's with the CUDA backend.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "core/thread_pool.h"

namespace striker {

class HostSampledSteps : public Backend {
 public:
  HostSampledSteps(std::unique_ptr<Backend> inner, int64_t vocab_size);
  ~HostSampledSteps() override;  // waits for the launched steps, then stops the worker

  std::string name() const override { return inner_->name(); }
  int64_t full_block_bytes(int32_t block_size) const override { return inner_->full_block_bytes(block_size); }
  int64_t sliding_block_bytes(int32_t block_size) const override { return inner_->sliding_block_bytes(block_size); }
  void allocate_kv_cache(const KvCacheSpec& spec) override;
  void forward(const ForwardBatch& batch, std::vector<float>& logits) override;
  void warm_up() override;

  bool samples_on_device() const override { return true; }
  // Every logprob is computed here: no row ever goes back to the engine.
  DeviceLogprobLimits device_logprobs() const override;
  void forward_sampled(const ForwardBatch& batch, const DeviceSampling& sampling, SampledStep& out) override;
  bool supports_async_steps() const override { return true; }
  void launch_sampled(const ForwardBatch& batch, const DeviceSampling& sampling) override;
  void collect_sampled(SampledStep& out) override;

 private:
  struct Step;
  // A launched step with its own copies of what the engine may change meanwhile (masks).
  std::shared_ptr<Step> make_step(const ForwardBatch& batch, const DeviceSampling& sampling) const;
  void run(Step& step);  // the worker: forward, draws, logprobs
  void worker_loop();
  void require_idle(const char* what) const;

  std::unique_ptr<Backend> inner_;
  size_t mask_words_;                           // a grammar mask's 32-bit words
  std::deque<std::shared_ptr<Step>> launched_;  // uncollected, oldest first (engine thread)
  std::vector<int32_t> last_draws_;             // the draws of the step the worker ran last
  std::vector<float> logits_;                   // worker only
  ThreadPool pool_;                             // the worker's draws, side by side
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Step>> queue_;     // launched, not yet run
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace striker
