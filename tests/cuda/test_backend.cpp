// The whole CudaBackend forward pass on a small random Flint (tiny-config shapes) against a
// host reference assembled from the per-kernel CPU references (FLINT.md §4 rounding points,
// double accumulation), through a paged cache with shuffled blocks, freed sliding blocks,
// chunked prefill (cuBLASLt + grouped MoE path), small chunks and decode steps (GEMV path), batches
// of two and of sixteen sequences.
#include <gtest/gtest.h>

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

TEST(CudaBackend, ForwardMatchesHostReferenceAcrossPrefillDecodeAndBatching) {
  HostModel hm = make_host_model(small_config());
  expect_backend_matches_reference(hm.model, hm.model);
}

// head_dim 128 with 8 query heads per KV head (Flint's attention shape): uncaptured steps with a
// run of >= 16 tokens take the tensor-core prefill attention (the 37-token chunk; the 18-token
// chunk beside a decode, which goes to the decode kernel through a query-id list).
TEST(CudaBackend, ForwardMatchesHostReferenceWithPrefillAttentionShape) {
  FlintConfig c = small_config();
  c.head_dim = 128;
  HostModel hm = make_host_model(c);
  expect_backend_matches_reference(hm.model, hm.model);
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

}  // namespace
}  // namespace striker::cuda::testing
