#include "cli/step_recorder.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "model/weight_bytes.h"

namespace striker::cli {

StepRecorder::StepRecorder(std::unique_ptr<Backend> inner, const FlintConfig& config, int64_t input_len)
    : inner_(std::move(inner)), config_(config), input_len_(input_len) {}

StepRecord StepRecorder::describe(const ForwardBatch& batch) const {
  StepRecord r;
  r.seqs = int(batch.seqs.size());
  r.decode_only = !batch.seqs.empty();
  for (const auto& ch : batch.seqs) {
    if (ch.tokens.size() != 1 || ch.start_pos < input_len_) r.decode_only = false;
    else r.kv_bytes += decode_kv_bytes(config_, ch.start_pos);
  }
  return r;
}

void StepRecorder::push(const StepRecord& r) {
  std::lock_guard<std::mutex> lock(mu_);
  steps_.push_back(r);
}

template <typename Step>
void StepRecorder::record(const ForwardBatch& batch, Step&& step) {
  StepRecord r = describe(batch);
  const auto t0 = Clock::now();
  step();
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  push(r);
}

void StepRecorder::forward(const ForwardBatch& batch, std::vector<float>& logits) {
  record(batch, [&] { inner_->forward(batch, logits); });
}

void StepRecorder::forward_sampled(const ForwardBatch& batch, const DeviceSampling& sampling, SampledStep& out) {
  record(batch, [&] { inner_->forward_sampled(batch, sampling, out); });
}

void StepRecorder::launch_sampled(const ForwardBatch& batch, const DeviceSampling& sampling) {
  Launched l{describe(batch), Clock::now()};
  inner_->launch_sampled(batch, sampling);
  launched_.push_back(l);
}

void StepRecorder::collect_sampled(SampledStep& out) {
  if (launched_.empty()) throw std::logic_error("StepRecorder: collect without a launched step");
  Launched l = launched_.front();
  launched_.pop_front();
  inner_->collect_sampled(out);
  const auto now = Clock::now();
  l.record.seconds = std::chrono::duration<double>(now - std::max(l.launched, last_collect_)).count();
  last_collect_ = now;
  push(l.record);
}

std::vector<StepRecord> StepRecorder::steps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return steps_;
}

}  // namespace striker::cli
