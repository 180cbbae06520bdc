// Token sampling on float logits (CPU), with vLLM semantics and per-choice reproducible
// randomness. Pure functions plus a small per-sequence penalty state.
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backends/backend.h"
#include "engine/engine.h"
#include "engine/sampling_params.h"

namespace striker {

class ThreadPool;

// Token statistics a sequence's penalties need, kept incrementally.
class PenaltyState {
 public:
  PenaltyState() = default;
  PenaltyState(const SamplingParams& params, std::span<const int32_t> prompt);
  void add_output(int32_t token);
  const std::unordered_map<int32_t, int32_t>& output_counts() const { return output_counts_; }
  const std::unordered_set<int32_t>& prompt_tokens() const { return prompt_tokens_; }

 private:
  std::unordered_map<int32_t, int32_t> output_counts_;
  std::unordered_set<int32_t> prompt_tokens_;  // only filled when repetition_penalty != 1
};

// Mixes two words into a well-spread 64-bit value (used to derive per-request seeds).
uint64_t mix_seed(uint64_t a, uint64_t b);

struct SampleContext {
  const SamplingParams* params = nullptr;
  const PenaltyState* penalties = nullptr;
  std::span<const int32_t> suppressed;  // ids masked out (stop ids while below min_tokens)
  uint64_t seed = 0;
  int32_t choice = 0;
  int64_t step = 0;                     // index of the output token being sampled
  const uint32_t* allowed = nullptr;    // structured outputs: packed bitset of drawable ids (null = all)
};

// Structured outputs: every id whose bit is clear in `allowed` (see SampleRequest) to -inf.
void apply_allowed_mask(std::span<float> x, const uint32_t* allowed);

// The logit processing before any randomness: the allowed mask, suppressed ids to -inf,
// logit_bias, penalties.
void process_logits(std::span<const float> logits, const SampleContext& ctx, std::vector<float>& out);

// Picks the next token. Order as vLLM: suppress, logit_bias, penalties (repetition over
// prompt+output, presence/frequency over output), then greedy argmax (lowest id on ties) when
// temperature is 0, else temperature, min_p, top_k, top_p (cuts rank by higher logit, then
// lower id) and the exponential race of sample_math.h over the kept tokens, whose random
// numbers depend only on (seed, choice, step, token id).
// `scratch` avoids a vocab-sized allocation per call.
int32_t sample_token(std::span<const float> logits, const SampleContext& ctx, std::vector<float>& scratch);

// The same draw described as a device SampleRequest: the reference the GPU sampler is tested
// against, and what a backend that "samples on the device" on the CPU calls.
SampleRequest make_sample_request(const SampleContext& ctx);
void process_logits(std::span<const float> logits, const SampleRequest& req, std::vector<float>& out);
// How close the top_p walk came to its cut: min over the cumulative masses compared with the
// target of |cum - target| / target (infinity when no top_p cut ran). GPU sums differ from the
// CPU's in the last bits, so a cut this close may legitimately fall one token apart.
struct SampleDiagnostics {
  double top_p_margin = 0;
};
int32_t sample_request(std::span<const float> logits, const SampleRequest& req, std::vector<float>& scratch,
                       SampleDiagnostics* diag = nullptr);

// log-softmax of the raw logits: the token's logprob and the top_n best (ties: lower id first).
// The row is taken in kLogprobChunks fixed chunks (maxima, sums of exp in double, each chunk's
// top_n), merged in chunk order, so the result has the same bits whether `pool` spreads the chunks
// over its threads or not (a 151,552-token row costs ~0.9 ms on one thread). `pool` must not be
// inside one of its own parallel_for calls.
constexpr int kLogprobChunks = 16;
TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int32_t top_n, ThreadPool* pool = nullptr);

}  // namespace striker
