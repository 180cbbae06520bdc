// CudaBackend::forward_sampled: the forward pass, then the tokens drawn on the GPU
// (sampling.h). Only the sampled ids and the rows asked for logprobs cross to the host.
// It is launch_sampled + collect_sampled; with async scheduling the engine calls those itself and
// launches step n + 1 before it collects step n (Backend::launch_sampled), so everything a launch
// writes to a pinned buffer is either the launch's own (two result slots) or rewritten only once
// the uncollected step's copy out of it has run (meta_uploaded_, params_uploaded_).
#include <algorithm>
#include <string>

#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/common/cuda_check.h"

namespace striker::cuda {

void CudaBackend::forward_sampled(const ForwardBatch& batch, const DeviceSampling& ds, SampledStep& out) {
  if (!launched_.empty()) throw Error("CUDA backend: forward_sampled called while a launched step is uncollected");
  launch_sampled(batch, ds);
  collect_sampled(out);
}

void CudaBackend::launch_sampled(const ForwardBatch& batch, const DeviceSampling& ds) {
  if (!sampling_) throw Error("CUDA backend: forward_sampled called with CudaBackendOptions::device_sampling off");
  if (launched_.size() >= 2) throw Error("CUDA backend: a third step launched before the first was collected");
  const bool ahead = !launched_.empty();  // another launched step is uncollected
  if (ahead && !ds.return_rows.empty())
    throw Error("CUDA backend: a step launched while another is uncollected asks for logits rows back");
  for (const SequenceChunk& c : batch.seqs)
    if (c.token_from_sample >= 0 && (!ahead || c.token_from_sample >= launched_.back().samples))
      throw Error("CUDA backend: token_from_sample " + std::to_string(c.token_from_sample) +
                  " names no draw of an uncollected step");
  const int64_t V = model_.config.vocab_size;
  // Everything is checked before the step is enqueued.
  int64_t rows = 0;
  for (const auto& s : batch.seqs) rows += s.all_logits ? int64_t(s.tokens.size()) : 1;
  if (rows > options_.max_logit_rows)
    throw Error("CUDA backend: " + std::to_string(rows) + " logits rows in one step, at most " +
                std::to_string(options_.max_logit_rows));
  SamplingBuffers& sb = *sampling_;
  pack_samples(ds.samples, int32_t(rows), V, sb.params, sb.edits);
  if (int64_t(ds.return_rows.size()) > rows)
    throw Error("CUDA backend: " + std::to_string(ds.return_rows.size()) + " logits rows asked back, the step has " +
                std::to_string(rows));
  if (int64_t(ds.return_rows.size()) > host_logit_rows())
    throw Error("CUDA backend: " + std::to_string(ds.return_rows.size()) + " logits rows asked back, the host buffer holds " +
                std::to_string(host_logit_rows()));
  for (int32_t r : ds.return_rows)
    if (r < 0 || r >= rows)
      throw Error("CUDA backend: logits row " + std::to_string(r) + " asked back, the step has " + std::to_string(rows));
  // Logprobs computed here: scored rows (prompt logprobs) in launches of kMaxDeviceLogprobRows, their
  // records first; then the sampled rows in one launch (rows checked by pack_samples above).
  const int n_scored = int(ds.prompt_logprobs.size());
  if (int64_t(n_scored) > options_.max_logit_rows)
    throw Error("CUDA backend: " + std::to_string(n_scored) + " rows of prompt logprobs, at most " +
                std::to_string(options_.max_logit_rows));
  for (int j = 0; j < n_scored; ++j) {
    const RowLogprobRequest& q = ds.prompt_logprobs[size_t(j)];
    if (q.row < 0 || q.row >= rows || q.token < 0 || q.token >= V || q.top_n < 0 || q.top_n > kMaxDeviceTopLogprobs)
      throw Error("CUDA backend: prompt logprobs request " + std::to_string(j) + " (row " + std::to_string(q.row) +
                  ", token " + std::to_string(q.token) + ", top_n " + std::to_string(q.top_n) + ") outside the step's " +
                  std::to_string(rows) + " rows, the vocabulary or top_n 0.." + std::to_string(kMaxDeviceTopLogprobs));
  }
  LogprobRows lp;
  lp.first_record = n_scored;
  for (size_t s = 0; s < ds.samples.size(); ++s) {
    const int32_t top = ds.samples[s].top_logprobs;
    if (top < 0) continue;
    if (top > kMaxDeviceTopLogprobs || lp.n == kMaxDeviceLogprobRows)
      throw Error("CUDA backend: sample " + std::to_string(s) + " asks " + std::to_string(top) +
                  " top logprobs as logprobs row " + std::to_string(lp.n + 1) + ", at most " +
                  std::to_string(kMaxDeviceTopLogprobs) + " in " + std::to_string(kMaxDeviceLogprobRows) + " rows");
    lp.r[lp.n++] = LogprobRow{ds.samples[s].row, int32_t(s), 0, top};
  }

  LaunchedSampling L;
  L.slot = ahead ? 1 - launched_.front().slot : 0;
  L.masks = std::any_of(ds.samples.begin(), ds.samples.end(), [](const SampleRequest& r) { return r.allowed != nullptr; });
  ResultSlot& slot = result_slots_[L.slot];
  STRIKER_CUDA_CHECK(cudaEventRecord(slot.start, stream_));
  launch_forward(batch);
  float* logits = logits_device();
  float* pinned = logits_pinned();
  for (int first = 0; first < n_scored; first += kMaxDeviceLogprobRows) {
    LogprobRows g;
    g.first_record = first;
    g.n = std::min(kMaxDeviceLogprobRows, n_scored - first);
    for (int j = 0; j < g.n; ++j) {
      const RowLogprobRequest& q = ds.prompt_logprobs[size_t(first + j)];
      g.r[j] = LogprobRow{q.row, -1, q.token, q.top_n};
    }
    logprob_prepare(logits, g, *logprobs_, stream_);
    logprob_finish(logits, g, nullptr, *logprobs_, stream_, slot.records);
  }
  // The sampled rows' snapshots, maxima, candidates and sums, before the masks and edits below.
  logprob_prepare(logits, lp, *logprobs_, stream_);
  // Raw rows for logprobs leave before the edits below change the logits in place.
  // Consecutive rows (a prompt-logprobs chunk) go in one copy.
  for (size_t j = 0; j < ds.return_rows.size();) {
    size_t k = j + 1;
    while (k < ds.return_rows.size() && ds.return_rows[k] == ds.return_rows[k - 1] + 1) ++k;
    STRIKER_CUDA_CHECK(cudaMemcpyAsync(pinned + int64_t(j) * V, logits + int64_t(ds.return_rows[j]) * V,
                                       (k - j) * size_t(V) * 4, cudaMemcpyDeviceToHost, stream_));
    j = k;
  }
  // Grammar masks: computed by the engine while the forward above runs on the GPU (with async
  // scheduling, once it has collected the uncollected step: the masks follow its tokens).
  if (ds.wait_for_masks) ds.wait_for_masks();
  if (L.masks && !launched_.empty() && launched_.front().masks)
    throw Error("CUDA backend: two uncollected steps read grammar masks (their pinned buffers are shared)");
  // The wait may have completed the samples (async scheduling: a penalty's counts): packed again
  // (the first packing above checked them before anything was enqueued).
  pack_samples(ds.samples, int32_t(rows), V, sb.params, sb.edits);
  masks_->apply(ds.samples, logits, stream_);
  const int n = int(sb.params.size());
  if (n > 0) {
    // The uncollected step uploads its parameters after its forward pass: wait for that copy
    // before rewriting the pinned buffer (this step's layers are already enqueued behind it).
    if (ahead) STRIKER_CUDA_CHECK(cudaEventSynchronize(params_uploaded_));
    std::copy(sb.params.begin(), sb.params.end(), sb.params_host());
    // Edits go up in chunks of the buffer's size; a second chunk waits for the first upload
    // (a sync), which only a step with more than max_sample_edits edits pays.
    const int64_t total = int64_t(sb.edits.size());
    int64_t done = 0;
    do {
      const int64_t chunk = std::min(total - done, sb.max_edits());
      if (done > 0) STRIKER_CUDA_CHECK(cudaStreamSynchronize(stream_));
      std::copy(sb.edits.begin() + done, sb.edits.begin() + done + chunk, sb.edits_host());
      sb.counts_host()[0] = n;
      sb.counts_host()[1] = int32_t(chunk);
      sb.upload(n, chunk, stream_);
      apply_logit_edits(logits, V, sb.params_dev(), sb.edits_dev(), sb.counts_dev(), chunk, stream_);
      done += chunk;
    } while (done < total);
    STRIKER_CUDA_CHECK(cudaEventRecord(params_uploaded_, stream_));
    sample_rows(logits, V, sb.params_dev(), sb.counts_dev(), n, sb.scratch(), sb.tokens_dev(), stream_,
                sample_paths(sb.params, V));
    STRIKER_CUDA_CHECK(cudaMemcpyAsync(slot.tokens, sb.tokens_dev(), size_t(n) * 4, cudaMemcpyDeviceToHost, stream_));
    logprob_finish(logits, lp, sb.tokens_dev(), *logprobs_, stream_, slot.records);
  }
  STRIKER_CUDA_CHECK(cudaEventRecord(slot.end, stream_));
  L.samples = n;
  L.rows_back = ds.return_rows.size();
  L.n_scored = n_scored;
  L.lp_n = lp.n;
  L.lp_first = lp.first_record;
  launched_.push_back(L);
}

void CudaBackend::collect_sampled(SampledStep& out) {
  if (launched_.empty()) throw Error("CUDA backend: collect_sampled without a launched step");
  const LaunchedSampling L = launched_.front();
  launched_.pop_front();  // consumed even if the wait below fails
  const ResultSlot& slot = result_slots_[L.slot];
  STRIKER_CUDA_CHECK(cudaEventSynchronize(slot.end));
  STRIKER_CUDA_CHECK(cudaEventElapsedTime(&last_device_ms_, slot.start, slot.end));
  const int64_t V = model_.config.vocab_size;
  const float* pinned = logits_pinned();
  out.tokens.assign(slot.tokens, slot.tokens + L.samples);
  out.logits.assign(pinned, pinned + L.rows_back * size_t(V));
  auto take = [&](int record, SampledLogprobs& o) {
    const LogprobRecord& rec = slot.records[record];
    o.logprob = rec.logprob;
    o.rank = rec.rank;
    o.top.clear();
    for (int k = 0; k < rec.n && k < kMaxDeviceTopLogprobs; ++k) o.top.emplace_back(rec.id[k], rec.value[k]);
  };
  out.prompt_logprobs.resize(size_t(L.n_scored));
  for (int j = 0; j < L.n_scored; ++j) take(j, out.prompt_logprobs[size_t(j)]);
  out.logprobs.resize(size_t(L.lp_n));
  for (int j = 0; j < L.lp_n; ++j) take(L.lp_first + j, out.logprobs[size_t(j)]);
}

}  // namespace striker::cuda
