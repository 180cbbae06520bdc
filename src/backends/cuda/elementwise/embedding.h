// Embedding gather: out[t] = table[ids[t]] (FLINT.md §4, h = E[token]).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "core/bf16.h"

namespace striker::cuda {

// table [vocab, hidden] bf16, ids [n] int32 on the device, out [n, hidden].
// The caller validates ids on the host; an id outside [0, vocab) still never reads out of
// bounds here: its row is written as NaN so the fault is visible, not silent.
void embedding_gather(const bf16* table, int64_t vocab, int64_t hidden, const int32_t* ids, int n,
                      bf16* out, cudaStream_t stream);

// Async scheduling: tokens[pairs[2i]] = drawn[pairs[2i + 1]] for i < n: a step's input tokens
// taken from the previous step's draws on the device (SequenceChunk::token_from_sample), before
// the step's embedding gather reads them. pairs, tokens and drawn on the device.
void take_drawn_tokens(int32_t* tokens, const int32_t* pairs, int n, const int32_t* drawn, cudaStream_t stream);

// CPU references with the same contracts.
void take_drawn_tokens_ref(std::vector<int32_t>& tokens, const std::vector<int32_t>& pairs, const std::vector<int32_t>& drawn);
void embedding_gather_ref(const std::vector<bf16>& table, int64_t vocab, int64_t hidden,
                          const std::vector<int32_t>& ids, std::vector<bf16>& out);

}  // namespace striker::cuda
