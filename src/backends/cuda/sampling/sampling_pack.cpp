// Host side of GPU sampling: SampleRequests -> SampleRowParams + per-token LogitEdits.
#include <algorithm>
#include <map>
#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/sampling/sampling.h"
#include "backends/sample_math.h"
#include "backends/sample_split.h"

namespace striker::cuda {

void pack_samples(const std::vector<SampleRequest>& samples, int32_t rows, int64_t vocab,
                  std::vector<SampleRowParams>& params, std::vector<LogitEdit>& edits) {
  namespace sm = sample_math;
  params.clear();
  edits.clear();
  std::vector<bool> row_used(size_t(std::max(rows, 0)), false);
  std::map<int32_t, LogitEdit> by_id;  // one edit per token of this sample, in id order
  for (size_t s = 0; s < samples.size(); ++s) {
    const SampleRequest& r = samples[s];
    const std::string where = "device sampling, sample " + std::to_string(s) + ": ";
    if (r.row < 0 || r.row >= rows)
      throw Error(where + "row " + std::to_string(r.row) + " outside the step's " + std::to_string(rows) + " logits rows");
    // Two samples on one row would edit the same logits concurrently.
    if (row_used[size_t(r.row)]) throw Error(where + "row " + std::to_string(r.row) + " is sampled twice");
    row_used[size_t(r.row)] = true;
    SampleRowParams q;
    q.row = r.row;
    q.greedy = r.temperature < 1e-5f;  // the CPU sampler's greedy test
    q.top_k = r.top_k > 0 && int64_t(r.top_k) < vocab ? r.top_k : 0;
    q.has_min_p = r.min_p > 0;
    q.temperature = r.temperature;
    q.inv_t = q.greedy ? 0.f : 1.0f / r.temperature;
    q.top_p = r.top_p;
    q.log_min_p = q.has_min_p ? sm::min_p_log(r.min_p) : 0.f;
    q.repetition_penalty = r.repetition_penalty;
    q.frequency_penalty = r.frequency_penalty;
    q.presence_penalty = r.presence_penalty;
    q.key = sm::race_key(r.seed, uint64_t(r.choice), uint64_t(r.step));
    params.push_back(q);

    by_id.clear();
    auto edit = [&](int32_t id, const char* list) -> LogitEdit& {
      if (id < 0 || int64_t(id) >= vocab)
        throw Error(where + list + " token id " + std::to_string(id) + " outside the vocabulary of " + std::to_string(vocab));
      LogitEdit& e = by_id[id];
      e.sample = int32_t(s);
      e.id = id;
      return e;
    };
    for (int32_t id : r.suppressed) edit(id, "suppressed").suppressed = 1;
    for (const auto& [id, bias] : r.logit_bias) {
      LogitEdit& e = edit(id, "logit_bias");
      if (e.bias != 0.f) throw Error(where + "logit_bias lists token " + std::to_string(id) + " twice");
      e.bias = bias;
    }
    if (r.repetition_penalty != 1.0f) {
      for (int32_t id : r.prompt_tokens) edit(id, "prompt_tokens").repeated = 1;
      for (const auto& [id, n] : r.output_counts) edit(id, "output_counts").repeated = 1;
    }
    if (r.frequency_penalty != 0.0f || r.presence_penalty != 0.0f) {
      for (const auto& [id, n] : r.output_counts) {
        LogitEdit& e = edit(id, "output_counts");
        if (e.output_count != 0) throw Error(where + "output_counts lists token " + std::to_string(id) + " twice");
        e.output_count = n;
      }
    }
    for (const auto& [id, e] : by_id) edits.push_back(e);
  }
}

}  // namespace striker::cuda

namespace striker::cuda {

SamplingBuffers::SamplingBuffers(int max_samples, int64_t max_edits) : max_samples_(max_samples), max_edits_(max_edits) {
  if (max_samples <= 0 || max_edits <= 0)
    throw Error("device sampling: buffer sizes must be positive (samples " + std::to_string(max_samples) + ", edits " +
                std::to_string(max_edits) + ")");
  edits_offset_ = (kParamsOffset + size_t(max_samples) * sizeof(SampleRowParams) + 15) & ~size_t(15);
  const size_t bytes = edits_offset_ + size_t(max_edits) * sizeof(LogitEdit);
  auto fail = [&](const char* what, cudaError_t err) {
    release();
    throw Error(std::string("device sampling: cannot allocate ") + what + " (" + std::to_string(bytes >> 20) +
                " MiB): " + cudaGetErrorString(err));
  };
  cudaError_t err = cudaMallocHost(reinterpret_cast<void**>(&host_), bytes);
  if (err != cudaSuccess) fail("pinned host buffer", err);
  err = cudaMalloc(reinterpret_cast<void**>(&dev_), bytes);
  if (err != cudaSuccess) fail("device buffer", err);
  err = cudaMalloc(reinterpret_cast<void**>(&tokens_dev_), size_t(max_samples) * 4);
  if (err != cudaSuccess) fail("device token buffer", err);
  err = cudaMallocHost(reinterpret_cast<void**>(&tokens_host_), size_t(max_samples) * 4);
  if (err != cudaSuccess) fail("pinned token buffer", err);
  // Split-path scratch: 8 bytes per candidate slot, 20 + 512 per slice, and per sample the cut path's
  // state and histogram (zeroed here; each digit's last CTA clears what it used).
  namespace ss = sample_split;
  const size_t slots = size_t(max_samples) * ss::kMaxCandidates, slices = size_t(max_samples) * ss::kMaxSplits;
  const size_t samples = size_t(max_samples), bins = samples * 256;
  const size_t cut_bytes = samples * sizeof(CutState) + bins * 8 + bins * 4;
  err = cudaMalloc(reinterpret_cast<void**>(&scratch_dev_), cut_bytes + slots * 8 + slices * 20 + slices * 256 * 2);
  if (err != cudaSuccess) fail("device sampling scratch", err);
  err = cudaMemset(scratch_dev_, 0, cut_bytes);
  if (err != cudaSuccess) fail("device sampling scratch (zeroing)", err);
  std::byte* at = scratch_dev_;  // 8-byte fields first: every array stays aligned
  scratch_.cut = reinterpret_cast<CutState*>(at);
  scratch_.cut_mass = reinterpret_cast<unsigned long long*>(at += samples * sizeof(CutState));
  scratch_.cut_count = reinterpret_cast<uint32_t*>(at += bins * 8);
  scratch_.cand_key = reinterpret_cast<uint32_t*>(at += bins * 4);
  scratch_.cand_id = reinterpret_cast<int32_t*>(at += slots * 4);
  scratch_.cand_n = reinterpret_cast<int32_t*>(at += slots * 4);
  scratch_.slice_max_v = reinterpret_cast<float*>(at += slices * 4);
  scratch_.slice_max_id = reinterpret_cast<int32_t*>(at += slices * 4);
  scratch_.slice_race_v = reinterpret_cast<float*>(at += slices * 4);
  scratch_.slice_race_id = reinterpret_cast<int32_t*>(at += slices * 4);
  scratch_.cut_slice_count = reinterpret_cast<uint16_t*>(at += slices * 4);
}

SamplingBuffers::~SamplingBuffers() { release(); }

void SamplingBuffers::release() {
  if (host_) cudaFreeHost(host_);
  if (dev_) cudaFree(dev_);
  if (tokens_dev_) cudaFree(tokens_dev_);
  if (tokens_host_) cudaFreeHost(tokens_host_);
  if (scratch_dev_) cudaFree(scratch_dev_);
  scratch_dev_ = nullptr;
  scratch_ = SampleScratch{};
  host_ = dev_ = nullptr;
  tokens_dev_ = tokens_host_ = nullptr;
}

SamplePaths sample_paths(const std::vector<SampleRowParams>& params, int64_t vocab) {
  const sample_split::SplitPlan plan = sample_split::split_plan(vocab);
  SamplePaths paths{false, false, false};
  for (const SampleRowParams& q : params) {
    const bool greedy = q.greedy != 0;
    const bool cuts = sample_split::uses_cuts(plan, greedy, q.top_k, q.top_p);
    paths.race |= cuts || sample_split::uses_race(plan, greedy, q.top_k, q.top_p);
    paths.top_k_cut |= cuts && q.top_k > 0;
    paths.top_p_cut |= cuts && q.top_p < 1.0f;
  }
  return paths;
}

void SamplingBuffers::upload(int samples, int64_t edits, cudaStream_t stream) const {
  STRIKER_CUDA_CHECK(cudaMemcpyAsync(dev_, host_, kParamsOffset + size_t(samples) * sizeof(SampleRowParams),
                                     cudaMemcpyHostToDevice, stream));
  if (edits > 0)
    STRIKER_CUDA_CHECK(cudaMemcpyAsync(dev_ + edits_offset_, host_ + edits_offset_, size_t(edits) * sizeof(LogitEdit),
                                       cudaMemcpyHostToDevice, stream));
}

}  // namespace striker::cuda
