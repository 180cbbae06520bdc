// Logprobs on the GPU: of sampled tokens (SampleRequest::top_logprobs) and of given tokens (prompt
// logprobs, RowLogprobRequest): the log-softmax of a row's raw logits at the token, and the row's
// best top_n tokens with theirs. The engine's token_logprob (engine/sampler.h) is the reference:
// the same maximum (NaN skipped), the same sum of float exp(v - m) in double, lse = m + log(sum) in
// double, each value float(v - lse), the best tokens by higher logit then lower id (-inf counts,
// NaN never) — only the sum's order differs.
//
// A row is split over the sampler's slices (backends/sample_split.h). logprob_prepare stores per
// slice its maximum and top_n candidates (first launch), then its sum against the row maximum
// (second launch); a sampled row is first copied into a snapshot, because the sampler's masks and
// edits change it in place, so its prepare runs before them. logprob_finish runs one CTA per row:
// the token's raw logit, lse from the slices' sums in slice order, the best top_n of the slices'
// candidates, best first — after the draw for a sampled row. Only these records cross to the
// host, not the 600 KB rows.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace striker::cuda {

constexpr int kMaxDeviceTopLogprobs = 32;  // top_n per row (vLLM's default --max-logprobs is 20)
constexpr int kMaxDeviceLogprobRows = 64;  // rows per launch; sampled rows per step (each takes a snapshot)

struct LogprobRow {
  int32_t row = 0;      // logits row of the step
  int32_t sample = -1;  // >= 0: the token is the sampler's output of this sample, the row is snapshotted
  int32_t token = 0;    // the scored token when sample < 0
  int32_t top_n = 0;    // 0 .. kMaxDeviceTopLogprobs
};

// A launch's rows, passed by value as a kernel parameter (~1 KB): no upload before the masks.
// Row j's record is records[first_record + j]; a sampled row j uses snapshot j.
struct LogprobRows {
  int32_t n = 0;
  int32_t first_record = 0;
  LogprobRow r[kMaxDeviceLogprobRows];
};

struct LogprobRecord {
  float logprob = 0;  // of the row's token
  int32_t n = 0;      // top entries written (fewer than top_n when the row has fewer non-NaN logits)
  int32_t rank = 0;   // a given token's: logits >= its logit (TokenLogprob::rank); 0 for a sampled one
  int32_t pad = 0;
  int32_t id[kMaxDeviceTopLogprobs];
  float value[kMaxDeviceTopLogprobs];  // best first
};

// Device arrays of the split (per row j: [j, V] snapshot, [j, kMaxSplits] slice fields,
// [j, kMaxSplits, kMaxDeviceTopLogprobs] candidates).
struct LogprobScratch {
  float* snapshot = nullptr;
  float* slice_max = nullptr;
  double* slice_sum = nullptr;
  int32_t* slice_rank = nullptr;  // a given token's row: the slice's logits >= the token's
  uint32_t* cand_key = nullptr;  // sample_math::order_key of the logit
  int32_t* cand_id = nullptr;
  int32_t* cand_n = nullptr;
  LogprobRecord* records = nullptr;  // [max_records]
};

// Device scratch and the pinned host records, allocated once for a vocabulary and the records of
// one step (its sampled and scored rows).
class LogprobBuffers {
 public:
  LogprobBuffers(int64_t vocab, int max_records);
  ~LogprobBuffers();
  LogprobBuffers(const LogprobBuffers&) = delete;
  LogprobBuffers& operator=(const LogprobBuffers&) = delete;
  int64_t vocab() const { return vocab_; }
  int max_records() const { return max_records_; }
  const LogprobScratch& scratch() const { return scratch_; }
  LogprobRecord* records_host() const { return records_host_; }

 private:
  int64_t vocab_;
  int max_records_;
  std::byte* dev_ = nullptr;
  LogprobRecord* records_host_ = nullptr;
  LogprobScratch scratch_;
};

// The snapshots, slice maxima, candidates and sums of `rows` (logits [*, vocab], raw: before the
// step's masks and edits). Throws striker::Error for rows beyond the buffers' limits.
void logprob_prepare(const float* logits, const LogprobRows& rows, const LogprobBuffers& buffers, cudaStream_t stream);
// After logprob_prepare of the same rows (and, for sampled rows, after the draw: `tokens` is the
// sampler's output by sample; may be null without sampled rows): their records, then an async copy
// of them to `host_records` (pinned, max_records() entries; null: records_host()), valid once the
// stream has reached it.
void logprob_finish(const float* logits, const LogprobRows& rows, const int32_t* tokens, const LogprobBuffers& buffers,
                    cudaStream_t stream, LogprobRecord* host_records = nullptr);

}  // namespace striker::cuda
