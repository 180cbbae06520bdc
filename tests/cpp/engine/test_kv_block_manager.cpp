#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/kv_block_manager.h"

using namespace striker;

TEST(KvPlan, SmallBudgetExactSizes) {
  KvBudget b;
  b.kv_cache_bytes = 10000;
  b.full_block_bytes = 400;
  b.sliding_block_bytes = 400;
  b.block_size = 4;
  b.sliding_window = 6;
  b.max_model_len = 32;
  b.max_num_seqs = 2;
  b.max_num_batched_tokens = 8;
  KvPoolPlan p = plan_kv_pools(b);
  // sliding: 2 seqs x 3 decode blocks + (5 - 3) extra for one 8-token chunk = 8 blocks
  EXPECT_EQ(p.layout.num_sliding_blocks, 8);
  EXPECT_EQ(p.layout.num_full_blocks, (10000 - 8 * 400) / 400);  // 17
  EXPECT_EQ(p.capacity_tokens, 17 * 4);
  EXPECT_EQ(p.max_concurrency, 2);  // min(17 / 8, 8 / 3)
}

TEST(KvPlan, FlintAtOneHundredGiB) {
  KvBudget b;
  b.kv_cache_bytes = int64_t(100) << 30;
  b.block_size = 16;
  b.full_block_bytes = 14 * 4 * 128 * 2 * 2 * 16;     // 28 KiB per token
  b.sliding_block_bytes = 35 * 4 * 128 * 2 * 2 * 16;  // 70 KiB per token
  b.sliding_window = 513;
  b.max_model_len = 262144;
  b.max_num_seqs = 256;
  b.max_num_batched_tokens = 2048;
  KvPoolPlan p = plan_kv_pools(b);
  EXPECT_EQ(p.layout.num_sliding_blocks, 256 * 34 + (161 - 34));
  EXPECT_EQ(p.layout.num_full_blocks, 211979);
  EXPECT_EQ(p.capacity_tokens, 3391664);
  EXPECT_EQ(p.max_concurrency, 12);
}

TEST(KvPlan, BudgetBelowOneSequenceIsAClearError) {
  KvBudget b;
  b.kv_cache_bytes = 4000;
  b.full_block_bytes = 400;
  b.sliding_block_bytes = 400;
  b.block_size = 4;
  b.sliding_window = 6;
  b.max_model_len = 32;
  b.max_num_seqs = 2;
  b.max_num_batched_tokens = 8;
  try {
    plan_kv_pools(b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fewer than max_model_len 32"), std::string::npos) << e.what();
  }
}

TEST(KvPlan, NoSlidingLayersPutsEverythingInTheFullPool) {
  KvBudget b;
  b.kv_cache_bytes = 4000;
  b.full_block_bytes = 400;
  b.sliding_block_bytes = 0;
  b.block_size = 4;
  b.max_model_len = 16;
  KvPoolPlan p = plan_kv_pools(b);
  EXPECT_FALSE(p.layout.use_sliding);
  EXPECT_EQ(p.layout.num_full_blocks, 10);
  EXPECT_EQ(p.layout.num_sliding_blocks, 0);
  EXPECT_EQ(p.max_concurrency, 2);
}

namespace {
KvLayout small_layout() {
  KvLayout L;
  L.block_size = 4;
  L.num_full_blocks = 100;
  L.num_sliding_blocks = 100;
  L.sliding_window = 6;
  return L;
}
}  // namespace

TEST(KvBlockManager, SlidingBlocksOutOfWindowAreFreedExactly) {
  KvBlockManager kv(small_layout());
  SeqBlockTables t;
  for (int64_t start = 0; start < 20; start += 4) {
    kv.release_out_of_window(t, start);
    ASSERT_EQ(kv.max_chunk_that_fits(t, start, 4), 4);
    kv.allocate_up_to(t, start + 4);
  }
  EXPECT_EQ(t.full, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  // start 12 frees block 0 (positions 0..3 < 12-6+1); start 16 frees block 1; ids are reused.
  EXPECT_EQ(t.sliding, (std::vector<int32_t>{-1, -1, 2, 0, 1}));
  EXPECT_EQ(kv.sliding_pool().num_used(), 3);
  kv.release_all(t);
  EXPECT_EQ(kv.full_pool().num_used(), 0);
  EXPECT_EQ(kv.sliding_pool().num_used(), 0);
  EXPECT_TRUE(t.full.empty());
}

TEST(KvBlockManager, SlidingNeverHoldsMoreThanTheWindowBound) {
  for (int64_t chunk : {1, 3, 5, 9}) {
    KvBlockManager kv(small_layout());
    SeqBlockTables t;
    const int64_t bound = ceil_div(6 + chunk - 1, 4) + 1;
    for (int64_t start = 0; start < 200; start += chunk) {
      kv.release_out_of_window(t, start);
      kv.allocate_up_to(t, start + chunk);
      EXPECT_LE(t.num_sliding_held(), bound) << "chunk " << chunk << " start " << start;
      // Every key any query of this chunk sees is still held.
      for (int64_t q = start; q < start + chunk; ++q)
        for (int64_t k = std::max<int64_t>(0, q - 5); k <= q; ++k) ASSERT_GE(t.sliding[size_t(k / 4)], 0);
    }
    EXPECT_EQ(kv.sliding_pool().num_used(), t.num_sliding_held());
    const int64_t last_end = ceil_div(200, chunk) * chunk;
    EXPECT_EQ(int64_t(t.full.size()), ceil_div(last_end, 4));  // the full pool keeps everything
  }
}

// release_out_of_window resumes where it stopped (SeqBlockTables::sliding_released) instead of
// rescanning the table: at every step exactly the blocks wholly before the window are -1, the pool
// holds the rest, and a table emptied by release_all starts over from its first block.
TEST(KvBlockManager, SlidingReleaseResumesAndStartsOverAfterReleaseAll) {
  for (int64_t chunk : {1, 4, 7}) {
    KvBlockManager kv(small_layout());
    SeqBlockTables t;
    for (int round = 0; round < 2; ++round) {
      for (int64_t start = 0; start < 120; start += chunk) {
        kv.release_out_of_window(t, start);
        const int64_t oldest_visible = start - 6 + 1;
        for (size_t i = 0; i < t.sliding.size(); ++i)
          ASSERT_EQ(t.sliding[i] < 0, int64_t(i + 1) * 4 <= oldest_visible)
              << "chunk " << chunk << " round " << round << " start " << start << " block " << i;
        ASSERT_EQ(kv.sliding_pool().num_used(), t.num_sliding_held());
        kv.allocate_up_to(t, start + chunk);
      }
      kv.release_all(t);
      EXPECT_EQ(t.sliding_released, 0u);
      EXPECT_EQ(kv.sliding_pool().num_used(), 0);
    }
  }
}

TEST(KvBlockManager, ChunkIsCutToTheFreeBlocks) {
  KvLayout L = small_layout();
  L.num_full_blocks = 3;
  KvBlockManager kv(L);
  SeqBlockTables t;
  EXPECT_EQ(kv.max_chunk_that_fits(t, 0, 20), 12);
  kv.allocate_up_to(t, 10);
  EXPECT_EQ(kv.full_pool().num_free(), 0);
  EXPECT_EQ(kv.max_chunk_that_fits(t, 10, 5), 2);  // the rest of block 2
  SeqBlockTables other;
  EXPECT_EQ(kv.max_chunk_that_fits(other, 0, 4), 0);
}

TEST(KvBlockManager, SlidingPoolCanBeTheLimit) {
  KvLayout L = small_layout();
  L.num_sliding_blocks = 3;
  KvBlockManager kv(L);
  SeqBlockTables t;
  EXPECT_EQ(kv.max_chunk_that_fits(t, 0, 40), 12);
  kv.allocate_up_to(t, 12);
  kv.release_out_of_window(t, 12);  // frees block 0
  EXPECT_EQ(kv.max_chunk_that_fits(t, 12, 40), 4);
}
