#include "engine/host_sampled_steps.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <utility>

#include "core/error.h"
#include "engine/sampler.h"

namespace striker {

struct HostSampledSteps::Step {
  ForwardBatch batch;
  DeviceSampling sampling;                    // allowed pointers into `masks`; no wait_for_masks
  std::vector<std::vector<uint32_t>> masks;   // copies of the grammar masks, by sample
  std::promise<SampledStep> done;
  std::future<SampledStep> result = done.get_future();
};

HostSampledSteps::HostSampledSteps(std::unique_ptr<Backend> inner, int64_t vocab_size)
    : inner_(std::move(inner)),
      mask_words_(size_t((vocab_size + 31) / 32)),
      pool_(int(std::min(8u, std::max(1u, std::thread::hardware_concurrency())))) {
  if (!inner_) throw Error("HostSampledSteps: no backend to wrap");
  if (vocab_size <= 0) throw Error("HostSampledSteps: vocabulary size must be positive");
  worker_ = std::thread([this] { worker_loop(); });
}

HostSampledSteps::~HostSampledSteps() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  worker_.join();  // the worker finishes every queued step first
}

void HostSampledSteps::require_idle(const char* what) const {
  if (!launched_.empty())
    throw std::logic_error(std::string("HostSampledSteps: ") + what + " while launched steps are uncollected");
}

void HostSampledSteps::allocate_kv_cache(const KvCacheSpec& spec) {
  require_idle("allocate_kv_cache");
  inner_->allocate_kv_cache(spec);
}

void HostSampledSteps::forward(const ForwardBatch& batch, std::vector<float>& logits) {
  require_idle("forward");
  inner_->forward(batch, logits);
}

void HostSampledSteps::warm_up() {
  require_idle("warm_up");
  inner_->warm_up();
}

DeviceLogprobLimits HostSampledSteps::device_logprobs() const {
  constexpr int32_t kAny = std::numeric_limits<int32_t>::max();
  return DeviceLogprobLimits{kAny, kAny, kAny};
}

std::shared_ptr<HostSampledSteps::Step> HostSampledSteps::make_step(const ForwardBatch& batch,
                                                                    const DeviceSampling& sampling) const {
  if (!sampling.return_rows.empty())
    throw std::logic_error("HostSampledSteps: rows asked back, but every logprob is computed here");
  // The engine completes masks (and, async, a penalty's counts) by the end of this wait and may
  // reuse the masks' storage for its next step: the step keeps its own copies, taken after it.
  if (sampling.wait_for_masks) sampling.wait_for_masks();
  auto step = std::make_shared<Step>();
  step->batch = batch;
  step->sampling.samples = sampling.samples;
  step->sampling.prompt_logprobs = sampling.prompt_logprobs;
  step->masks.resize(sampling.samples.size());
  for (size_t i = 0; i < sampling.samples.size(); ++i) {
    const uint32_t* allowed = sampling.samples[i].allowed;
    if (!allowed) continue;
    step->masks[i].assign(allowed, allowed + mask_words_);  // a packed bitset over the vocabulary
    step->sampling.samples[i].allowed = step->masks[i].data();
  }
  return step;
}

void HostSampledSteps::forward_sampled(const ForwardBatch& batch, const DeviceSampling& sampling, SampledStep& out) {
  launch_sampled(batch, sampling);
  collect_sampled(out);
}

void HostSampledSteps::launch_sampled(const ForwardBatch& batch, const DeviceSampling& sampling) {
  if (launched_.size() >= 2) throw std::logic_error("HostSampledSteps: a third step launched before the first was collected");
  for (const SequenceChunk& c : batch.seqs)
    if (c.token_from_sample >= 0 && launched_.empty())
      throw std::logic_error("HostSampledSteps: a chunk takes a token from the previous step, but none is uncollected");
  std::shared_ptr<Step> step = make_step(batch, sampling);
  {
    std::lock_guard lock(mu_);
    queue_.push_back(step);
  }
  cv_.notify_one();
  launched_.push_back(std::move(step));
}

void HostSampledSteps::collect_sampled(SampledStep& out) {
  if (launched_.empty()) throw std::logic_error("HostSampledSteps: collect without a launched step");
  std::shared_ptr<Step> step = std::move(launched_.front());
  launched_.pop_front();  // consumed even if it failed
  out = step->result.get();  // rethrows the step's failure
}

void HostSampledSteps::worker_loop() {
  for (;;) {
    std::shared_ptr<Step> step;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      step = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      run(*step);
    } catch (...) {
      last_draws_.clear();  // a step after a failed one cannot take its tokens
      step->done.set_exception(std::current_exception());
    }
  }
}

void HostSampledSteps::run(Step& step) {
  for (SequenceChunk& c : step.batch.seqs) {
    if (c.token_from_sample < 0) continue;
    if (size_t(c.token_from_sample) >= last_draws_.size() || c.tokens.size() != 1)
      throw Error("HostSampledSteps: token_from_sample " + std::to_string(c.token_from_sample) +
                  " names no draw of the previous step");
    c.tokens[0] = last_draws_[size_t(c.token_from_sample)];
    c.token_from_sample = -1;
  }
  inner_->forward(step.batch, logits_);
  int64_t rows = 0;
  for (const SequenceChunk& c : step.batch.seqs) rows += c.all_logits ? int64_t(c.tokens.size()) : 1;
  if (rows == 0 || logits_.size() % size_t(rows) != 0)
    throw Error("HostSampledSteps: backend " + inner_->name() + " returned " + std::to_string(logits_.size()) +
                " logits for " + std::to_string(rows) + " rows");
  const size_t V = logits_.size() / size_t(rows);
  auto row = [&](int32_t r) {
    if (r < 0 || r >= rows) throw Error("HostSampledSteps: row " + std::to_string(r) + " outside the step's rows");
    return std::span<const float>(logits_.data() + size_t(r) * V, V);
  };
  // Each draw and logprob reads only its own row: they run side by side (the engine's host path
  // does the same), each a pure function of its row and request.
  const std::vector<SampleRequest>& samples = step.sampling.samples;
  const std::vector<RowLogprobRequest>& scored = step.sampling.prompt_logprobs;
  SampledStep out;
  out.tokens.resize(samples.size());
  std::vector<std::optional<SampledLogprobs>> lps(samples.size());
  out.prompt_logprobs.resize(scored.size());
  const int64_t n = int64_t(samples.size() + scored.size());
  auto work = [&](int64_t begin, int64_t end) {
    std::vector<float> scratch;
    for (int64_t i = begin; i < end; ++i) {
      if (size_t(i) < samples.size()) {
        const SampleRequest& sr = samples[size_t(i)];
        out.tokens[size_t(i)] = sample_request(row(sr.row), sr, scratch);
        if (sr.top_logprobs < 0) continue;
        const TokenLogprob lp = token_logprob(row(sr.row), out.tokens[size_t(i)], sr.top_logprobs);
        lps[size_t(i)] = SampledLogprobs{lp.logprob, lp.top, 0};
      } else {
        const RowLogprobRequest& q = scored[size_t(i) - samples.size()];
        const TokenLogprob lp = token_logprob(row(q.row), q.token, q.top_n);
        out.prompt_logprobs[size_t(i) - samples.size()] = SampledLogprobs{lp.logprob, lp.top, lp.rank};
      }
    }
  };
  if (pool_.size() > 1 && n > 1) pool_.parallel_for(n, (n + pool_.size() - 1) / pool_.size(), work);
  else work(0, n);
  for (auto& lp : lps)
    if (lp) out.logprobs.push_back(std::move(*lp));
  last_draws_ = out.tokens;
  step.done.set_value(std::move(out));
}

}  // namespace striker
