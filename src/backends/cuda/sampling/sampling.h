// Token sampling on the GPU: the same draw as the CPU sampler (src/engine/sampler.cpp, the
// reference), so a step returns token ids instead of [rows, vocab] float logits.
//
// Logit edits (penalties, bias, suppression) are applied in place by a small kernel first.
// Rows with a small top_k (the server default, top_k 20) take the candidate path: several CTAs
// per row each keep a superset of their slice's top_k, and one CTA finishes the draw on that
// union with the CPU sampler's own steps (sort, top_p walk, race; sampling.cu). Every other
// row: one CTA per row: the row's max/argmax, the top_k threshold by radix select over
// the float keys (4 passes of 8 bits), the top_p threshold by a mass-weighted radix select,
// ties at either cut resolved by lower id with a block scan, and the exponential race as an
// argmax reduction (backends/sample_math.h). No sort, no allocation, no host sync: every
// count is read from device memory, so the launches can be captured in a CUDA graph.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/backend.h"

namespace striker::cuda {

// One row's draw, packed on the host from a SampleRequest.
struct SampleRowParams {
  int32_t row = 0;        // logits row of the step
  int32_t greedy = 0;     // temperature < 1e-5
  int32_t top_k = 0;      // 0: off (also when >= vocab)
  int32_t has_min_p = 0;
  float temperature = 1.f;
  float inv_t = 1.f;      // 1 / temperature, computed on the host as the CPU sampler does
  float top_p = 1.f;      // >= 1: off
  float log_min_p = 0.f;  // sample_math::min_p_log(min_p)
  float repetition_penalty = 1.f;
  float frequency_penalty = 0.f;
  float presence_penalty = 0.f;
  int32_t pad = 0;
  uint64_t key = 0;       // sample_math::race_key(seed, choice, step)
};

// One token's edit in one row: every SampleRequest list merged per (sample, id), so one
// thread applies all of a token's changes in the reference order (sample_math::process_logit).
struct LogitEdit {
  int32_t sample = 0;  // index into the SampleRowParams array
  int32_t id = 0;
  float bias = 0.f;
  int32_t output_count = 0;
  int32_t suppressed = 0;
  int32_t repeated = 0;  // seen in the prompt or the output (repetition penalty)
};

// Device scratch of the candidate path (top_k rows split over several CTAs, see
// backends/sample_split.h), indexed by sample: per slice its candidate count and greedy
// argmax ([samples, kMaxSplits]), and the candidates themselves ([samples, kMaxCandidates],
// slice s at s * cap). All null: every row takes the one-CTA path.
struct SampleScratch {
  uint32_t* cand_key = nullptr;  // sample_math::order_key of the logit
  int32_t* cand_id = nullptr;
  int32_t* cand_n = nullptr;
  float* slice_max_v = nullptr;
  int32_t* slice_max_id = nullptr;
  float* slice_race_v = nullptr;  // race path: each slice's best race score and its token
  int32_t* slice_race_id = nullptr;
};

// Host: SampleRequests -> packed params and edits. Throws striker::Error naming the sample
// and field when a row or token id is outside [0, rows) / [0, vocab).
void pack_samples(const std::vector<SampleRequest>& samples, int32_t rows, int64_t vocab,
                  std::vector<SampleRowParams>& params, std::vector<LogitEdit>& edits);

// Pinned host and device buffers for one step's sampling inputs and outputs, allocated once.
// Layout of both `host` and `dev`: [counts: 4 x int32 | params: max_samples | edits: max_edits].
class SamplingBuffers {
 public:
  SamplingBuffers(int max_samples, int64_t max_edits);
  ~SamplingBuffers();
  SamplingBuffers(const SamplingBuffers&) = delete;
  SamplingBuffers& operator=(const SamplingBuffers&) = delete;

  int max_samples() const { return max_samples_; }
  int64_t max_edits() const { return max_edits_; }
  int32_t* counts_host() const { return reinterpret_cast<int32_t*>(host_); }
  SampleRowParams* params_host() const { return reinterpret_cast<SampleRowParams*>(host_ + kParamsOffset); }
  LogitEdit* edits_host() const { return reinterpret_cast<LogitEdit*>(host_ + edits_offset_); }
  const int32_t* counts_dev() const { return reinterpret_cast<const int32_t*>(dev_); }
  const SampleRowParams* params_dev() const { return reinterpret_cast<const SampleRowParams*>(dev_ + kParamsOffset); }
  const LogitEdit* edits_dev() const { return reinterpret_cast<const LogitEdit*>(dev_ + edits_offset_); }
  int32_t* tokens_dev() const { return tokens_dev_; }
  int32_t* tokens_host() const { return tokens_host_; }
  const SampleScratch& scratch() const { return scratch_; }
  // Enqueues host -> device copies of the counts, the first `samples` params and `edits` edits.
  void upload(int samples, int64_t edits, cudaStream_t stream) const;

  std::vector<SampleRowParams> params;  // packing scratch, reused every step
  std::vector<LogitEdit> edits;

 private:
  void release();
  static constexpr size_t kParamsOffset = 16;
  int max_samples_;
  int64_t max_edits_;
  size_t edits_offset_ = 0;
  std::byte* host_ = nullptr;
  std::byte* dev_ = nullptr;
  int32_t* tokens_dev_ = nullptr;
  int32_t* tokens_host_ = nullptr;
  std::byte* scratch_dev_ = nullptr;
  SampleScratch scratch_;
};

// counts[0] = number of samples, counts[1] = number of edits (device memory, so a captured
// graph can be replayed with new counts). logits: [rows, vocab] fp32, edited in place.
// Launches over `max_edits` / `max_samples` slots; slots past the counts do nothing.
void apply_logit_edits(float* logits, int64_t vocab, const SampleRowParams* params, const LogitEdit* edits,
                       const int32_t* counts, int64_t max_edits, cudaStream_t stream);
// Rows with 0 < top_k <= sample_split::split_plan(vocab).cap (and not greedy) take the
// candidate path (two kernels, several CTAs per row); rows without a top_k or top_p cut (greedy
// included) the race path (three kernels, several CTAs per row; `any_race` says whether the step has
// one, so steps without skip its kernel); the others one CTA per row. `scratch` must hold
// max_samples samples (SamplingBuffers::scratch()).
void sample_rows(const float* logits, int64_t vocab, const SampleRowParams* params, const int32_t* counts,
                 int max_samples, const SampleScratch& scratch, int32_t* out_tokens, cudaStream_t stream,
                 bool any_race = true);

}  // namespace striker::cuda
