// Replays one CTA stage of the Hopper grouped GEMM (moe_grouped_wgmma.cu) on the host: the
// producer's cp.async placement of the gathered A rows, TMA's placement of the two 128-row weight
// boxes, the consumers' wgmma descriptors for each k16 step (read back through the hardware
// address model of wgmma_layout.h), and the epilogue's register → (row, column) mapping including
// the gate/up pairing (register i + 64). A slip in any offset shows as a wrong product.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "backends/cuda/common/wgmma_layout.h"
#include "backends/cuda/moe/moe_grouped_wgmma.h"
#include "backends/cuda/moe/moe_grouped_wgmma_layout.h"

namespace striker::cuda {
namespace {

TEST(MoeGroupedWgmmaLayout, ProducerCopiesEveryAChunkOnce) {
  std::set<std::pair<int, int>> seen;
  for (int t = 0; t < kWgProducerThreads; ++t)
    for (int p = 0; p < kWgAPasses; ++p) {
      const int r = wg_a_row(t, p), c = wg_a_chunk(t);
      ASSERT_TRUE(r >= 0 && r < kWgTileRows && c >= 0 && c < 8);
      ASSERT_TRUE(seen.insert({r, c}).second) << "thread " << t << " pass " << p;
    }
  EXPECT_EQ(seen.size(), size_t(kWgTileRows * 8));
  // One warp's pass covers 4 whole rows (8 threads × 16 bytes = 128 contiguous bytes each).
  for (int p = 0; p < kWgAPasses; ++p)
    for (int w = 0; w < kWgProducerThreads / 32; ++w) {
      std::set<int> rows;
      for (int l = 0; l < 32; ++l) rows.insert(wg_a_row(w * 32 + l, p));
      EXPECT_EQ(rows.size(), 4u);
    }
}

// Which steps take the Hopper path.
TEST(MoeGroupedWgmmaLayout, PathSelection) {
  EXPECT_FALSE(moe_wgmma_for(256 * 6, 256));  // decode batch: 6 rows per expert, 16-row mma.sync tiles
  EXPECT_FALSE(moe_wgmma_for(682 * 6, 256));
  EXPECT_TRUE(moe_wgmma_for(683 * 6, 256));
  EXPECT_TRUE(moe_wgmma_for(8192 * 6, 256));  // 8K prefill: 192 rows per expert
  EXPECT_FALSE(moe_wgmma_nvfp4_for(1023 * 6, 256));  // NVFP4: 64-row mma.sync tiles below 24 rows per expert
  EXPECT_TRUE(moe_wgmma_nvfp4_for(1024 * 6, 256));   // 24 rows per expert: the fewest measured faster
  EXPECT_TRUE(moe_wgmma_nvfp4_for(2048 * 6, 256));
  EXPECT_EQ(moe_tile_rows_for(2048 * 6, 256), 64);
  EXPECT_EQ(kMoeWgmmaTileRows, kWgTileRows);
}

TEST(MoeGroupedWgmmaLayout, RingFitsAndStaysAligned) {
  EXPECT_LE(kWgSmemBytes, 227 * 1024);  // one CTA per SM, opt-in limit of sm_90
  for (int s = 0; s < kWgStages; ++s) {
    EXPECT_EQ(wg_a_stage(s) % kSw128AtomBytes, 0u);
    EXPECT_EQ(wg_b_stage(s) % kSw128AtomBytes, 0u);
    EXPECT_EQ((wg_b_stage(s) + kWgHalfBRows * kSw128RowBytes) % kSw128AtomBytes, 0u);
    EXPECT_LE(wg_b_stage(s) + uint32_t(kWgBBytes), uint32_t(kWgStages * kWgStageBytes));
  }
}

// One stage of k = 64 for a gated CTA: tile rows x A[128][64], weights B[256][64] (gate rows 0..127,
// up rows 128..255). Small integers keep every float sum exact.
TEST(MoeGroupedWgmmaLayout, OneStageThroughDescriptorsGivesTheTileProduct) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);
  std::vector<float> A(size_t(kWgTileRows) * kWgBK), B(size_t(kWgBRows) * kWgBK);
  for (auto& v : A) v = float(small(rng));
  for (auto& v : B) v = float(small(rng));
  for (uint32_t ring : {0u, 1024u, 3072u})
    for (int s = 0; s < kWgStages; ++s) {
      // Shared memory as bf16 slots indexed by byte address / 2 (NaN = never written).
      std::vector<float> smem(size_t(ring + kWgStages * kWgStageBytes) / 2, std::nanf(""));
      for (int t = 0; t < kWgProducerThreads; ++t)  // the producer's cp.async of 8 bf16 each
        for (int p = 0; p < kWgAPasses; ++p) {
          const int r = wg_a_row(t, p), c = wg_a_chunk(t);
          for (int e = 0; e < 8; ++e)
            smem[(ring + wg_a_stage(s) + sw128_offset(r, c)) / 2 + size_t(e)] = A[size_t(r) * kWgBK + c * 8 + e];
        }
      for (int half = 0; half < 2; ++half)  // TMA: two boxes of 128 rows, each written with the swizzle
        for (int r = 0; r < kWgHalfBRows; ++r)
          for (int k = 0; k < kWgBK; ++k) {
            const uint32_t box = ring + wg_b_stage(s) + uint32_t(half * kWgHalfBRows * kSw128RowBytes);
            const uint32_t logical = box + uint32_t(r) * kSw128RowBytes + uint32_t(k) * 2;
            smem[sw128_address(logical) / 2] = B[size_t(half * kWgHalfBRows + r) * kWgBK + k];
          }
      for (int wg = 0; wg < kWgConsumerWarpgroups; ++wg) {
        std::vector<double> D(size_t(64) * kWgBRows, 0.0);
        for (int kk = 0; kk < kWgBK / 16; ++kk) {
          const uint64_t da = wgmma_desc_sw128(ring + wg_a_desc_offset(s, wg, kk));
          const uint64_t db = wgmma_desc_sw128(ring + wg_b_desc_offset(s, kk));
          for (int m = 0; m < 64; ++m)
            for (int n = 0; n < kWgBRows; ++n)
              for (int k = 0; k < 16; ++k)
                D[size_t(m) * kWgBRows + size_t(n)] += double(smem[wgmma_operand_address(da, m, k) / 2]) *
                                                        double(smem[wgmma_operand_address(db, n, k) / 2]);
        }
        auto want = [&](int row, int brow) {
          double v = 0;
          for (int k = 0; k < kWgBK; ++k) v += double(A[size_t(row) * kWgBK + k]) * double(B[size_t(brow) * kWgBK + k]);
          return v;
        };
        for (int t = 0; t < 128; ++t)
          for (int i = 0; i < 64; ++i) {  // the gated epilogue: g in register i, u in register i + 64
            const int row = wg * 64 + wgmma_acc_row(t, i), col = wgmma_acc_col(t, i);
            ASSERT_EQ(wgmma_acc_row(t, i + 64), wgmma_acc_row(t, i));
            ASSERT_EQ(wgmma_acc_col(t, i + 64), col + kWgHalfBRows);
            const double g = D[size_t(wgmma_acc_row(t, i)) * kWgBRows + size_t(col)];
            const double u = D[size_t(wgmma_acc_row(t, i + 64)) * kWgBRows + size_t(wgmma_acc_col(t, i + 64))];
            ASSERT_EQ(g, want(row, col)) << "ring " << ring << " stage " << s << " wg " << wg << " t " << t << " i " << i;
            ASSERT_EQ(u, want(row, kWgHalfBRows + col)) << "up, wg " << wg << " t " << t << " i " << i;
          }
      }
    }
}

}  // namespace
}  // namespace striker::cuda
