// Teacher-forced scoring for `striker perplexity`: feeds known token sequences through a
// backend and records log P(next token) at every position. Two ways to feed them, so the
// backend's prefill path and its decode path can both be checked against FLINT.md §4:
//   score_prefill       one sequence in prefill chunks (each chunk attends to the cached prefix);
//   score_decode_batch  several sequences at once: one short prefill each, then every step one
//                       token of every unfinished sequence in a single ForwardBatch (the shape
//                       of a serving decode step).
// score_from = S skips the rows of positions before S: those tokens are prefilled without logits
// (prefill chunks stop at S, so scoring starts on a chunk boundary), which keeps a long context's
// logits off the host when only what follows it is checked.
// Memory: a step's logits reach the host in blocks of at most block_rows rows
// (Backend::forward_streamed), each reduced to its scores before the next arrives, so the host
// holds block_rows x vocab floats of logits (~150 MB at Flint's vocabulary) whatever the chunk
// size or the number of positions scored; what is kept is ~16 bytes per position (+ top_n pairs).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "model/config.h"

namespace striker::cli {

// Logits rows held on the host at once while scoring.
constexpr int64_t kScoreBlockRows = 256;

struct Scores {
  std::vector<double> logprobs;  // logprobs[i] = log P(ids[i+1] | ids[0..i])
  std::vector<int32_t> argmax;   // most likely token after position i (lowest id on ties)
  // With top_n > 0: the top_n most likely tokens after each position, (id, logprob), best
  // first, so two backends can be compared under the near-tie rule without full logits.
  std::vector<std::vector<std::pair<int32_t, double>>> top;
};

// Rows for positions score_from .. ids.size()-2; needs score_from < ids.size() - 1.
Scores score_prefill(Backend& backend, const FlintConfig& config, const std::vector<int32_t>& ids,
                     int64_t chunk_size, int top_n, int64_t score_from = 0,
                     int64_t block_rows = kScoreBlockRows);

// Each sequence needs at least prefill + 1 tokens (and more than score_from + 1); prefill >= 1.
// Returns one Scores per sequence, in the order given.
std::vector<Scores> score_decode_batch(Backend& backend, const FlintConfig& config,
                                       const std::vector<std::vector<int32_t>>& sequences, int64_t prefill,
                                       int top_n, int64_t score_from = 0, int64_t block_rows = kScoreBlockRows);

// The most logits rows one step of score_prefill / score_decode_batch computes (device buffer sizing;
// they reach the host in blocks of block_rows).
int64_t prefill_logit_rows(int64_t n_ids, int64_t chunk_size, int64_t score_from);
int64_t decode_logit_rows(int64_t n_sequences, int64_t prefill, int64_t score_from);

// Splits ids into n contiguous sequences whose lengths differ by at most one (the first ones
// take the remainder), so n decoded sequences together cover the given ids.
std::vector<std::vector<int32_t>> split_sequences(const std::vector<int32_t>& ids, int64_t n);

}  // namespace striker::cli
