// Token sampling on the GPU: the same draw as the CPU sampler (src/engine/sampler.cpp, the
// reference), so a step returns token ids instead of [rows, vocab] float logits.
//
// Logit edits (penalties, bias, suppression) are applied in place by a small kernel first. Every
// row is then split over several CTAs (backends/sample_split.h), on one of three paths:
//  - candidate path (0 < top_k <= the split's cap; the server default top_k 20): each slice keeps a
//    superset of its top_k, and one CTA finishes the draw on that union with the CPU sampler's own
//    steps (sort, top_p walk, race);
//  - race path (no top_k or top_p cut: greedy, temperature, min_p): each slice's winner of the
//    exponential race, and one CTA takes the best;
//  - cut path (top_p without top_k, or a larger top_k): the top_k threshold by a radix select
//    over the float keys and the top_p threshold by a mass-weighted one (4 digits of 8 bits each),
//    every digit one launch whose slices add to the row's histogram and whose last CTA picks the
//    bin; ties at either cut go to the lower ids; then the race path's kernels on the kept tokens.
// No sort, no allocation, no host sync: every count is read from device memory, so the launches
// can be captured in a CUDA graph.
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

// The cut path's state of one row, in device scratch: the radix select in progress (top_k's
// digits first, then top_p's) and the cuts it has settled. Written by the last CTA of each digit's
// launch, read by every CTA of the next.
struct CutState {
  uint32_t prefix, pmask;  // the digits selected so far, and their bits
  int32_t need;            // top_k: how many tokens of the current bucket are still wanted
  int32_t k_dead;          // top_k: fewer than top_k tokens pass the min_p floor, so no top_k cut
  int32_t k_on, p_on;      // the settled cuts: a token passes when its key is above `key`, or equal
  uint32_t k_key, p_key;   // with an id at most `limit`
  int32_t k_limit, p_limit;
  uint64_t above;          // top_p: mass ranked above the current bucket (sample_math::mass_fixed units)
  double target;           // top_p: top_p times the row's mass
  uint32_t arrivals;       // slices done with the current digit (the last one resets it)
  uint32_t pad;
};

// Device scratch of the split paths (see backends/sample_split.h), indexed by sample: per slice
// its candidate count, greedy argmax and race winner ([samples, kMaxSplits]), the candidates
// themselves ([samples, kMaxCandidates], slice s at s * cap), and the cut path's state, row
// histogram ([samples], [samples, 256]) and, for the last digit of a cut, each slice's histogram
// (which slice holds the tied token where the cut falls).
struct SampleScratch {
  uint32_t* cand_key = nullptr;  // sample_math::order_key of the logit
  int32_t* cand_id = nullptr;
  int32_t* cand_n = nullptr;
  float* slice_max_v = nullptr;
  int32_t* slice_max_id = nullptr;
  float* slice_race_v = nullptr;  // race path: each slice's best race score and its token
  int32_t* slice_race_id = nullptr;
  CutState* cut = nullptr;
  uint32_t* cut_count = nullptr;           // [samples, 256]: tokens per bin of the current digit
  unsigned long long* cut_mass = nullptr;  // [samples, 256]: their mass (top_p digits)
  uint16_t* cut_slice_count = nullptr;     // [samples, kMaxSplits, 256]: a cut's last digit per slice
};

// Which of the optional launches a step needs (computed on the host from its packed rows, so a
// step without such rows skips them); all true runs every launch, whose rows then return at once.
struct SamplePaths {
  bool race = true;       // race_kernel: race-path and cut-path rows
  bool top_k_cut = true;  // the 4 top_k digit launches
  bool top_p_cut = true;  // the 4 top_p digit launches
};
SamplePaths sample_paths(const std::vector<SampleRowParams>& params, int64_t vocab);

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
// The draw of every row (the paths above). `scratch` must hold max_samples samples
// (SamplingBuffers::scratch()); `paths` may leave out launches no row of the step needs.
// Throws striker::Error for a vocabulary above sample_split::kMaxVocab.
void sample_rows(const float* logits, int64_t vocab, const SampleRowParams* params, const int32_t* counts,
                 int max_samples, const SampleScratch& scratch, int32_t* out_tokens, cudaStream_t stream,
                 const SamplePaths& paths = {});

}  // namespace striker::cuda
