// The shapes CudaBackend::warm_up runs (cuda_warm_up.cpp), kept free of device code so host tests
// (tests/cuda/host) check that every one fits the model's positions, the step's token budget and
// the KV pools — a warm-up forward() that throws would stop the server from starting.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace striker::cuda {

struct WarmUpPlan {
  int64_t prefix = 0;                  // tokens of the first chunk (at position 0), whole blocks
  std::vector<int64_t> chunk_sizes;    // chunks after the prefix: 16, 32, ... and the budget
  int decode_batches = 0;              // decode steps of 1..decode_batches sequences after the prefix
};

// max_pos: the model's max_position_embeddings; max_tokens: tokens per forward(); pool_blocks:
// the smaller KV pool's blocks. Nothing is planned when not even the prefix fits.
inline WarmUpPlan plan_warm_up(int64_t max_pos, int64_t max_tokens, int32_t block_size, int64_t pool_blocks) {
  WarmUpPlan p;
  if (block_size <= 0) return p;
  const int64_t B = block_size;
  // Long enough that chunks after it split their keys (the prefix-cache hit path).
  const int64_t prefix = std::min<int64_t>({1024, max_pos / 2, max_tokens}) / B * B;
  if (prefix <= 0 || prefix / B > pool_blocks) return p;
  p.prefix = prefix;
  auto fits = [&](int64_t T) { return prefix + T <= max_pos && (prefix + T + B - 1) / B <= pool_blocks; };
  for (int64_t T = 16; T < max_tokens; T *= 2)
    if (fits(T)) p.chunk_sizes.push_back(T);
  if (fits(max_tokens)) p.chunk_sizes.push_back(max_tokens);
  // Each decoding sequence writes its token (position `prefix`) into a block of its own.
  while (p.decode_batches < 8 && prefix + 1 <= max_pos && prefix / B + p.decode_batches + 1 <= pool_blocks)
    ++p.decode_batches;
  return p;
}

}  // namespace striker::cuda
