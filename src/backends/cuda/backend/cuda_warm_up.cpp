// CudaBackend::warm_up: one forward per shape a server's first requests meet, before serving.
//
// Why (docs/performance.md, ninth session): the first forward of a shape in a fresh process pays
// one-time costs — `bench prefill --tokens 281 --context 32000` took 178 ms on its first run and
// 30 ms after — so without this a server's first requests (and the first chunk over a long cached
// prefix) paid them inside their time to first token. The plan (warm_up_plan.h) keeps every
// forward within the model's positions, the token budget and the pools.
#include <algorithm>
#include <chrono>
#include <numeric>
#include <vector>

#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/backend/warm_up_plan.h"
#include "core/log.h"

namespace striker::cuda {

void CudaBackend::warm_up() {
  const WarmUpPlan plan = plan_warm_up(model_.config.max_position_embeddings, options_.max_tokens,
                                       kv_spec_.block_size,
                                       std::min(kv_spec_.num_full_blocks, kv_spec_.num_sliding_blocks));
  if (plan.prefix == 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t B = kv_spec_.block_size, vocab = model_.config.vocab_size;
  std::vector<float> logits;
  // One sequence on blocks 0.. of both pools (every block present: the sliding table has no holes).
  auto chunk = [&](int64_t start, int64_t T) {
    SequenceChunk ch;
    ch.start_pos = start;
    for (int64_t i = 0; i < T; ++i) ch.tokens.push_back(int32_t((start + i) * 7919 % vocab));
    ch.full_block_table.resize(size_t((start + T + B - 1) / B));
    std::iota(ch.full_block_table.begin(), ch.full_block_table.end(), 0);
    ch.sliding_block_table = ch.full_block_table;
    ForwardBatch batch;
    batch.seqs.push_back(std::move(ch));
    forward(batch, logits);
  };
  // The prefix first, so every later chunk attends to keys this warm-up wrote (no undefined KV).
  chunk(0, plan.prefix);
  for (int64_t T : plan.chunk_sizes) chunk(plan.prefix, T);
  // Decode steps after the same prefix, each sequence writing its token into a block of its own.
  const int64_t prefix_blocks = plan.prefix / B;
  for (int n = 1; n <= plan.decode_batches; ++n) {
    ForwardBatch batch;
    for (int s = 0; s < n; ++s) {
      SequenceChunk ch;
      ch.start_pos = plan.prefix;
      ch.tokens = {int32_t((plan.prefix + s) * 7919 % vocab)};
      ch.full_block_table.resize(size_t(prefix_blocks));
      std::iota(ch.full_block_table.begin(), ch.full_block_table.end(), 0);
      ch.full_block_table.push_back(int32_t(prefix_blocks + s));
      ch.sliding_block_table = ch.full_block_table;
      batch.seqs.push_back(std::move(ch));
    }
    forward(batch, logits);
  }
  logging::get("cuda")->info("warm-up: {} forward passes (prefill chunks of {}..{} tokens after {} cached, decode "
                             "1-{}) in {:.2f} s",
                             1 + plan.chunk_sizes.size() + size_t(plan.decode_batches),
                             plan.chunk_sizes.empty() ? 0 : plan.chunk_sizes.front(),
                             plan.chunk_sizes.empty() ? 0 : plan.chunk_sizes.back(), plan.prefix, plan.decode_batches,
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace striker::cuda
