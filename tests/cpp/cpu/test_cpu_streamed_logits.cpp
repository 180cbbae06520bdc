// Backend::forward_streamed on the CPU: the same logits as forward(), bit for bit, handed over
// in order in blocks of at most the requested rows (perplexity's bound on host memory).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "backend_harness.h"
#include "synthetic_model.h"

namespace striker::test {
namespace {

constexpr int32_t kBlock = 4;

ForwardBatch two_sequences(const BackendHarness& h, const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  ForwardBatch batch;
  batch.seqs.push_back(h.chunk(0, a, 0, int64_t(a.size()), true));   // a row per token
  batch.seqs.push_back(h.chunk(1, b, 0, int64_t(b.size()), false));  // the last token's row only
  return batch;
}

TEST(CpuStreamedLogits, BlocksConcatenateToForwardBitForBit) {
  const LoadedModel model = make_synthetic_model(21);
  std::vector<int32_t> a(23), b(10);
  std::iota(a.begin(), a.end(), 100);
  std::iota(b.begin(), b.end(), 500);
  BackendHarness ref(model, 2, kBlock, 2, 32);
  const std::vector<float> want = ref.run(two_sequences(ref, a, b));
  const int64_t V = ref.vocab(), rows = int64_t(a.size()) + 1;
  ASSERT_EQ(int64_t(want.size()), rows * V);

  for (int64_t max_rows : {1, 5, 24, 100}) {
    BackendHarness h(model, 2, kBlock, 2, 32);
    std::vector<float> got;
    int64_t peak = 0;
    h.backend().forward_streamed(two_sequences(h, a, b), max_rows, [&](int64_t first, const float* block, int64_t count) {
      EXPECT_EQ(first * V, int64_t(got.size())) << "blocks arrive in order, without gaps";
      peak = std::max(peak, count);
      got.insert(got.end(), block, block + count * V);
    });
    EXPECT_EQ(peak, std::min(max_rows, rows)) << "max_block_rows " << max_rows;
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float))) << "max_block_rows " << max_rows;
  }
}

TEST(CpuStreamedLogits, RefusesBlocksOfNoRows) {
  const LoadedModel model = make_synthetic_model(22);
  BackendHarness h(model, 2, kBlock, 2, 32);
  const std::vector<int32_t> a = {1, 2, 3};
  EXPECT_THROW(h.backend().forward_streamed(two_sequences(h, a, a), 0, [](int64_t, const float*, int64_t) {}), Error);
}

}  // namespace
}  // namespace striker::test
