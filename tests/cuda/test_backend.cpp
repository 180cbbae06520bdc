// The whole CudaBackend forward pass on a small random Flint (tiny-config shapes) against a
// host reference assembled from the per-kernel CPU references (FLINT.md §4 rounding points,
// double accumulation), through a paged cache with shuffled blocks, freed sliding blocks,
// chunked prefill (cuBLASLt + grouped MoE path), small chunks and decode steps (GEMV path), batches
// of two and of sixteen sequences.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backend_reference.h"
#include "backends/cuda/backend/cuda_backend.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {
namespace {

TEST(CudaBackend, BatchedStepsOf64And16TokensMatchHostReference) {
  HostModel hm = make_host_model(small_config());
  expect_batched_steps_match_reference(hm.model, hm.model, "bf16");
}

// Kernels of a one-token BF16 step: the embedding gather; per layer the QKV GEMV (input norm inside),
// the attention front (this shape: its own kernel; Flint's: inside the split kernel), the split
// kernel and the combine, o_proj with the residual, then gate/up (norm inside) and down for a dense
// layer, or router (norm inside), gate/up and down for a MoE layer; the LM head (norm inside).
int one_token_step_kernels(const FlintConfig& c, bool front_in_split_kernel) {
  const int dense = int(c.first_k_dense_replace), moe = int(c.num_hidden_layers) - dense;
  const int attention = front_in_split_kernel ? 2 : 3;
  return 1 + dense * (2 + attention + 2) + moe * (2 + attention + 3) + 1;
}

TEST(CudaBackend, ForwardMatchesHostReferenceAcrossPrefillDecodeAndBatching) {
  HostModel hm = make_host_model(small_config());
  expect_backend_matches_reference(hm.model, hm.model, one_token_step_kernels(hm.model.config, false));
}

// head_dim 128 with 8 query heads per KV head (Flint's attention shape): uncaptured steps with a
// run of >= 16 tokens take the tensor-core prefill attention (the 37-token chunk; the 18-token
// chunk beside a decode, which goes to the decode kernel through a query-id list).
TEST(CudaBackend, ForwardMatchesHostReferenceWithPrefillAttentionShape) {
  FlintConfig c = small_config();
  c.head_dim = 128;
  HostModel hm = make_host_model(c);
  expect_backend_matches_reference(hm.model, hm.model, one_token_step_kernels(c, true));
}

// KV cache blocks of 32, 64 and 128 tokens (serve's --block-size): the same steps with one or two
// blocks per sequence, the one-token front writing its key into the middle of a block.
TEST(CudaBackend, ForwardMatchesHostReferenceWithLargerCacheBlocks) {
  FlintConfig c = small_config();
  c.head_dim = 128;
  HostModel hm = make_host_model(c);
  for (int block : {32, 64, 128}) {
    SCOPED_TRACE("blocks of " + std::to_string(block) + " tokens");
    expect_backend_matches_reference(hm.model, hm.model, one_token_step_kernels(c, true), block);
  }
}

TEST(CudaBackend, RejectsBadTokensAndTables) {
  const FlintConfig c = small_config();
  HostModel hm = make_host_model(c);
  auto backend = make_cuda_backend(hm.model, CudaBackendOptions{64, 8, 1024});
  std::vector<float> logits;
  ForwardBatch batch;
  batch.seqs.push_back(SequenceChunk{{1, 2}, 0, {0}, {0}, false});
  EXPECT_THROW(backend->forward(batch, logits), Error);  // no KV cache yet
  backend->allocate_kv_cache(KvCacheSpec{16, 4, 4});
  backend->forward(batch, logits);
  EXPECT_EQ(logits.size(), size_t(c.vocab_size));
  batch.seqs[0].tokens = {int32_t(c.vocab_size)};
  EXPECT_THROW(backend->forward(batch, logits), Error);  // token outside the vocabulary
  batch.seqs[0] = SequenceChunk{{1}, 16, {0}, {0, 1}, false};
  EXPECT_THROW(backend->forward(batch, logits), Error);  // full table too short for position 16
  batch.seqs[0] = SequenceChunk{{1}, 0, {4}, {0}, false};
  EXPECT_THROW(backend->forward(batch, logits), Error);  // block id outside the pool
  std::vector<int32_t> many(100, 1);
  batch.seqs[0] = SequenceChunk{many, 0, {0, 1, 2, 3, 0, 1, 2}, {0, 1, 2, 3, 0, 1, 2}, false};
  EXPECT_THROW(backend->forward(batch, logits), Error);  // more tokens than max_tokens
}

// forward_streamed (perplexity's path): the rows forward() returns, bit for bit, in order, in
// blocks no larger than the pinned host buffer (max_host_logit_rows) or the block asked for.
TEST(CudaBackend, ForwardStreamedHandsForwardsRowsOverInBlocks) {
  const FlintConfig c = small_config();
  HostModel hm = make_host_model(c);
  const int64_t V = c.vocab_size;
  auto batch = [] {
    ForwardBatch b;
    std::vector<int32_t> a(40), z(7);
    for (size_t i = 0; i < a.size(); ++i) a[i] = int32_t(3 + 5 * i);
    for (size_t i = 0; i < z.size(); ++i) z[i] = int32_t(11 + 7 * i);
    b.seqs.push_back(SequenceChunk{a, 0, {0, 1, 2}, {0, 1, 2}, true});  // 40 rows (a cuBLASLt lm_head)
    b.seqs.push_back(SequenceChunk{z, 0, {3}, {3}, false});             // 1 row
    return b;
  };
  auto whole = make_cuda_backend(hm.model, CudaBackendOptions{64, 64, 1024});
  whole->allocate_kv_cache(KvCacheSpec{16, 4, 4});
  std::vector<float> want;
  whole->forward(batch(), want);
  ASSERT_EQ(int64_t(want.size()), 41 * V);

  CudaBackendOptions small{64, 64, 1024};
  small.max_host_logit_rows = 5;
  auto streamed = make_cuda_backend(hm.model, small);
  streamed->allocate_kv_cache(KvCacheSpec{16, 4, 4});
  for (int64_t block : {8, 3}) {
    std::vector<float> got;
    int64_t peak = 0;
    streamed->forward_streamed(batch(), block, [&](int64_t first, const float* rows, int64_t count) {
      EXPECT_EQ(first * V, int64_t(got.size()));
      peak = std::max(peak, count);
      got.insert(got.end(), rows, rows + count * V);
    });
    EXPECT_EQ(peak, std::min<int64_t>(block, 5));
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float))) << "block " << block;
  }
  std::vector<float> logits;
  EXPECT_THROW(streamed->forward(batch(), logits), Error);  // 41 rows, a host buffer of 5
  EXPECT_THROW(streamed->forward_streamed(batch(), 0, [](int64_t, const float*, int64_t) {}), Error);
}

}  // namespace
}  // namespace striker::cuda::testing
