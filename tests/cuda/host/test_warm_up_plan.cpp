// plan_warm_up: every warm-up forward fits the model's positions, the token budget and the KV
// pools (a forward() that throws at start-up would keep the server from serving), for the full
// Flint shape, the tiny test models and small budgets.
#include <gtest/gtest.h>

#include "backends/cuda/backend/warm_up_plan.h"

using striker::cuda::plan_warm_up;

namespace {

void expect_fits(int64_t max_pos, int64_t max_tokens, int32_t B, int64_t pool) {
  SCOPED_TRACE(testing::Message() << "max_pos " << max_pos << " max_tokens " << max_tokens << " block " << B
                                  << " pool " << pool);
  const auto p = plan_warm_up(max_pos, max_tokens, B, pool);
  if (p.prefix == 0) {
    EXPECT_TRUE(p.chunk_sizes.empty());
    EXPECT_EQ(p.decode_batches, 0);
    return;
  }
  EXPECT_EQ(p.prefix % B, 0);
  EXPECT_LE(p.prefix, max_tokens);
  EXPECT_LE(p.prefix, max_pos);
  EXPECT_LE(p.prefix / B, pool);
  for (int64_t T : p.chunk_sizes) {
    EXPECT_LE(T, max_tokens);
    EXPECT_LE(p.prefix + T, max_pos);
    EXPECT_LE((p.prefix + T + B - 1) / B, pool);
  }
  EXPECT_LE(p.decode_batches, 8);
  if (p.decode_batches > 0) {
    EXPECT_LE(p.prefix + 1, max_pos);
    EXPECT_LE(p.prefix / B + p.decode_batches, pool);
  }
}

}  // namespace

TEST(WarmUpPlan, FullFlintServeDefaults) {
  const auto p = plan_warm_up(262144, 8192, 16, 1 << 20);
  EXPECT_EQ(p.prefix, 1024);
  EXPECT_EQ(p.chunk_sizes, (std::vector<int64_t>{16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192}));
  EXPECT_EQ(p.decode_batches, 8);
}

TEST(WarmUpPlan, SmallModelsSkipChunksPastTheirPositions) {
  const auto p = plan_warm_up(4096, 8192, 16, 1 << 20);  // the tool-call fixture's 4096 positions
  EXPECT_EQ(p.prefix, 1024);
  EXPECT_EQ(p.chunk_sizes, (std::vector<int64_t>{16, 32, 64, 128, 256, 512, 1024, 2048}));
  expect_fits(4096, 8192, 16, 1 << 20);
}

TEST(WarmUpPlan, EveryForwardFitsOverManyLimits) {
  for (int64_t max_pos : {1, 15, 16, 40, 128, 1000, 2048, 4096, 40000, 262144})
    for (int64_t max_tokens : {8, 16, 100, 512, 2048, 8192, 16384})
      for (int32_t B : {1, 16, 48, 64, 256})
        for (int64_t pool : {0, 1, 3, 20, 70, 600, 100000}) expect_fits(max_pos, max_tokens, B, pool);
}

TEST(WarmUpPlan, NothingWithoutRoom) {
  EXPECT_EQ(plan_warm_up(4096, 8192, 0, 1000).prefix, 0);   // no KV cache yet
  EXPECT_EQ(plan_warm_up(20, 8192, 16, 1000).prefix, 0);    // not a whole block below max_pos / 2
  EXPECT_EQ(plan_warm_up(4096, 8192, 16, 10).prefix, 0);    // the prefix's 64 blocks do not fit
}
