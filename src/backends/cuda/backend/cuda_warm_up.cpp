// CudaBackend::warm_up: one forward per shape a server's first requests meet, before serving.
//
// Measured reason (docs/performance.md, ninth session): the first 281-token chunk over a cached
// 32K prefix took 12-15 ms longer than every later one: kernels are loaded on first use (CUDA's
// lazy module loading: the split prefill attention, the mid-size cuBLASLt tiles, the small-T MoE
// tiles) and a multi-turn chat's second turn is the first request to need them.
#include <algorithm>
#include <chrono>
#include <numeric>
#include <vector>

#include "backends/cuda/backend/cuda_backend.h"
#include "core/log.h"

namespace striker::cuda {

void CudaBackend::warm_up() {
  const int B = kv_spec_.block_size;
  if (B <= 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t vocab = model_.config.vocab_size;
  // A cached prefix long enough that chunks after it split their keys (the prefix-cache hit path),
  // whole blocks so the decode steps below write into blocks of their own.
  const int64_t kPrefix = std::max<int64_t>(1, 1024 / B) * B;
  const int64_t pool = std::min(kv_spec_.num_full_blocks, kv_spec_.num_sliding_blocks);
  std::vector<float> logits;
  int runs = 0;
  // One sequence: blocks 0.. in both pools (the sliding layers need no -1 holes: every block is there).
  auto chunk = [&](int64_t start, int64_t T) {
    const int64_t blocks = (start + T + B - 1) / B;
    if (blocks > pool) return false;
    SequenceChunk ch;
    ch.start_pos = start;
    for (int64_t i = 0; i < T; ++i) ch.tokens.push_back(int32_t((start + i) * 7919 % vocab));
    ch.full_block_table.resize(size_t(blocks));
    std::iota(ch.full_block_table.begin(), ch.full_block_table.end(), 0);
    ch.sliding_block_table = ch.full_block_table;
    ForwardBatch batch;
    batch.seqs.push_back(std::move(ch));
    forward(batch, logits);
    ++runs;
    return true;
  };
  // The prefix first, so every later chunk attends to keys this warm-up wrote (no undefined KV).
  if (!chunk(0, kPrefix)) return;
  // Chunk sizes 16, 32, ... and the step's token budget (a long prompt's full chunks).
  std::vector<int64_t> sizes;
  for (int64_t T = 16; T < options_.max_tokens; T *= 2) sizes.push_back(T);
  sizes.push_back(options_.max_tokens);
  for (int64_t T : sizes) chunk(kPrefix, T);
  // Decode steps of 1..8 sequences after the same prefix, each writing its token into its own block.
  const int64_t prefix_blocks = kPrefix / B;
  for (int n = 1; n <= 8 && prefix_blocks + n <= pool; ++n) {
    ForwardBatch batch;
    for (int s = 0; s < n; ++s) {
      SequenceChunk ch;
      ch.start_pos = kPrefix;
      ch.tokens = {int32_t((kPrefix + s) * 7919 % vocab)};
      ch.full_block_table.resize(size_t(prefix_blocks));
      std::iota(ch.full_block_table.begin(), ch.full_block_table.end(), 0);
      ch.full_block_table.push_back(int32_t(prefix_blocks + s));
      ch.sliding_block_table = ch.full_block_table;
      batch.seqs.push_back(std::move(ch));
    }
    forward(batch, logits);
    ++runs;
  }
  logging::get("cuda")->info("warm-up: {} forward passes (prefill chunks 16..{} tokens after {} cached, decode 1-8) in {:.2f} s",
                             runs, options_.max_tokens, kPrefix,
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace striker::cuda
