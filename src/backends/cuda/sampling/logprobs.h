// Logprobs of sampled tokens on the GPU (SampleRequest::top_logprobs): the log-softmax of a row's
// raw logits at the sampled token, and the row's best top_n tokens with theirs. The engine's
// token_logprob (engine/sampler.h) is the reference: the same maximum (NaN skipped), the same
// sum of float exp(v - m) in double, lse = m + log(sum) in double, each value float(v - lse), the
// best tokens by higher logit then lower id (-inf counts, NaN never) — only the sum's order differs.
//
// A row is split over the sampler's slices (backends/sample_split.h). Before the step's masks and
// edits change the logits in place, logprob_prepare copies each row into a snapshot, and stores
// per slice its maximum and top_n candidates (first launch), then its sum against the row maximum
// (second launch). After the draw, logprob_finish runs one CTA per row: the sampled token's raw
// logit from the snapshot, lse from the slices' sums in slice order, the best top_n of the
// slices' candidates, best first. Only these records cross to the host, not the 600 KB rows.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace striker::cuda {

constexpr int kMaxDeviceTopLogprobs = 32;  // top_n per row (vLLM's default --max-logprobs is 20)
constexpr int kMaxDeviceLogprobRows = 64;  // rows per step: each takes a vocabulary-sized snapshot

struct LogprobRow {
  int32_t row = 0;     // logits row of the step
  int32_t sample = 0;  // index into the sampler's output tokens
  int32_t top_n = 0;   // 0 .. kMaxDeviceTopLogprobs
};

// A step's rows, passed by value as a kernel parameter (772 bytes): no upload before the masks.
struct LogprobRows {
  int32_t n = 0;
  LogprobRow r[kMaxDeviceLogprobRows];
};

struct LogprobRecord {
  float logprob = 0;  // of the sampled token
  int32_t n = 0;      // top entries written (fewer than top_n when the row has fewer non-NaN logits)
  int32_t id[kMaxDeviceTopLogprobs];
  float value[kMaxDeviceTopLogprobs];  // best first
};

// Device arrays of the split (per row j: [j, V] snapshot, [j, kMaxSplits] slice fields,
// [j, kMaxSplits, kMaxDeviceTopLogprobs] candidates).
struct LogprobScratch {
  float* snapshot = nullptr;
  float* slice_max = nullptr;
  double* slice_sum = nullptr;
  uint32_t* cand_key = nullptr;  // sample_math::order_key of the logit
  int32_t* cand_id = nullptr;
  int32_t* cand_n = nullptr;
  LogprobRecord* records = nullptr;  // [kMaxDeviceLogprobRows]
};

// Device scratch and the pinned host records, allocated once for a vocabulary.
class LogprobBuffers {
 public:
  explicit LogprobBuffers(int64_t vocab);
  ~LogprobBuffers();
  LogprobBuffers(const LogprobBuffers&) = delete;
  LogprobBuffers& operator=(const LogprobBuffers&) = delete;
  int64_t vocab() const { return vocab_; }
  const LogprobScratch& scratch() const { return scratch_; }
  LogprobRecord* records_host() const { return records_host_; }

 private:
  int64_t vocab_;
  std::byte* dev_ = nullptr;
  LogprobRecord* records_host_ = nullptr;
  LogprobScratch scratch_;
};

// Before the step's masks and edits: the snapshot, slice maxima, candidates and sums of `rows`
// (logits [*, vocab], the raw rows). Throws striker::Error for a row out of the buffers' bounds.
void logprob_prepare(const float* logits, const LogprobRows& rows, const LogprobBuffers& buffers, cudaStream_t stream);
// After the draw (`tokens`: the sampler's output, by sample): one record per row, then an async
// copy of them to records_host() (valid once the stream has reached it).
void logprob_finish(const LogprobRows& rows, const int32_t* tokens, const LogprobBuffers& buffers, cudaStream_t stream);

}  // namespace striker::cuda
