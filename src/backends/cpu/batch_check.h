// Validation of a ForwardBatch against the model and the KV pools, done once per step so
// the forward pass can assume in-range token ids, positions and block ids.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/kv_cache.h"
#include "model/config.h"

namespace striker::cpu {

struct FlatBatch {
  std::vector<int32_t> tokens;     // every token of every chunk, in batch order
  std::vector<TokenSlot> slots;    // position and block tables of each token
  std::vector<int64_t> logit_rows; // indices into tokens whose logits are returned
};

// Throws striker::Error naming the sequence and field when the batch cannot be run.
FlatBatch check_and_flatten(const ForwardBatch& batch, const FlintConfig& config, const KvCache& cache);

}  // namespace striker::cpu
