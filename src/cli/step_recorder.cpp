#include "cli/step_recorder.h"

#include <chrono>

#include "model/weight_bytes.h"

namespace striker::cli {

StepRecorder::StepRecorder(std::unique_ptr<Backend> inner, const FlintConfig& config, int64_t input_len)
    : inner_(std::move(inner)), config_(config), input_len_(input_len) {}

template <typename Step>
void StepRecorder::record(const ForwardBatch& batch, Step&& step) {
  StepRecord r;
  r.seqs = int(batch.seqs.size());
  r.decode_only = !batch.seqs.empty();
  for (const auto& ch : batch.seqs) {
    if (ch.tokens.size() != 1 || ch.start_pos < input_len_) r.decode_only = false;
    else r.kv_bytes += decode_kv_bytes(config_, ch.start_pos);
  }
  const auto t0 = std::chrono::steady_clock::now();
  step();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::lock_guard<std::mutex> lock(mu_);
  steps_.push_back(r);
}

void StepRecorder::forward(const ForwardBatch& batch, std::vector<float>& logits) {
  record(batch, [&] { inner_->forward(batch, logits); });
}

void StepRecorder::forward_sampled(const ForwardBatch& batch, const DeviceSampling& sampling, SampledStep& out) {
  record(batch, [&] { inner_->forward_sampled(batch, sampling, out); });
}

std::vector<StepRecord> StepRecorder::steps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return steps_;
}

}  // namespace striker::cli
