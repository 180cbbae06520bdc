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

// CPU reference with the same contract.
void embedding_gather_ref(const std::vector<bf16>& table, int64_t vocab, int64_t hidden,
                          const std::vector<int32_t>& ids, std::vector<bf16>& out);

}  // namespace striker::cuda
