// Replays one CTA stage of the Hopper grouped GEMM (moe_grouped_wgmma.cu) on the host, for each
// ring (WgRingK64: 128B swizzle; WgRingK32: 64B swizzle): the producer's cp.async placement of the
// gathered A rows, TMA's placement of the two 128-row weight boxes, the consumers' wgmma
// descriptors for each k16 step (read back through the hardware address model of
// wgmma_layout.h), and the epilogue's register → (row, column) mapping including the gate/up
// pairing (register i + 64). A slip in any offset shows as a wrong product.
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

template <class Ring>
class MoeGroupedWgmmaRing : public ::testing::Test {};
using Rings = ::testing::Types<WgRingK64, WgRingK32>;
TYPED_TEST_SUITE(MoeGroupedWgmmaRing, Rings);

TYPED_TEST(MoeGroupedWgmmaRing, ProducerCopiesEveryAChunkOnce) {
  using Ring = TypeParam;
  std::set<std::pair<int, int>> seen;
  for (int t = 0; t < kWgProducerThreads; ++t)
    for (int p = 0; p < Ring::kAPasses; ++p) {
      const int r = Ring::a_row(t, p), c = Ring::a_chunk(t);
      ASSERT_TRUE(r >= 0 && r < kWgTileRows && c >= 0 && c < Ring::kChunks);
      ASSERT_TRUE(seen.insert({r, c}).second) << "thread " << t << " pass " << p;
    }
  EXPECT_EQ(seen.size(), size_t(kWgTileRows * Ring::kChunks));
  // One warp's pass covers whole rows (kChunks threads × 16 bytes = one row's contiguous bytes each).
  for (int p = 0; p < Ring::kAPasses; ++p)
    for (int w = 0; w < kWgProducerThreads / 32; ++w) {
      std::set<int> rows;
      for (int l = 0; l < 32; ++l) rows.insert(Ring::a_row(w * 32 + l, p));
      EXPECT_EQ(rows.size(), size_t(32 / Ring::kChunks));
    }
}

// Hand swizzle (the producer's cp.async destinations) = what the hardware XOR makes of the
// logical address (what TMA writes and wgmma reads), from any atom-aligned base.
TYPED_TEST(MoeGroupedWgmmaRing, HandSwizzleMatchesTheHardwareXor) {
  using Ring = TypeParam;
  for (uint32_t base : {0u, uint32_t(Ring::kAtomBytes), 3u * 1024u + uint32_t(Ring::kABytes)})
    for (int row = 0; row < kWgBRows; ++row)
      for (int chunk = 0; chunk < Ring::kChunks; ++chunk) {
        const uint32_t logical = base + uint32_t(row * Ring::kRowBytes + chunk * 16);
        ASSERT_EQ(Ring::hw_address(logical), base + Ring::swizzled(row, chunk)) << "row " << row << " chunk " << chunk;
      }
}

// Which steps take the Hopper path.
TEST(MoeGroupedWgmmaLayout, PathSelection) {
  EXPECT_FALSE(moe_wgmma_for(256 * 6, 256));  // decode batch: 6 rows per expert, 16-row mma.sync tiles
  EXPECT_FALSE(moe_wgmma_for(682 * 6, 256));
  EXPECT_TRUE(moe_wgmma_for(683 * 6, 256));
  EXPECT_TRUE(moe_wgmma_for(8192 * 6, 256));  // 8K prefill: 192 rows per expert
  EXPECT_FALSE(moe_wgmma_nvfp4_for(1024 * 6, 256));  // NVFP4: 64-row mma.sync tiles up to 40 rows per expert
  EXPECT_FALSE(moe_wgmma_nvfp4_for(1706 * 6, 256));
  EXPECT_TRUE(moe_wgmma_nvfp4_for(1707 * 6, 256));
  EXPECT_TRUE(moe_wgmma_nvfp4_for(2048 * 6, 256));
  EXPECT_EQ(moe_tile_rows_for(2048 * 6, 256), 64);
  EXPECT_EQ(kMoeWgmmaTileRows, kWgTileRows);
}

TYPED_TEST(MoeGroupedWgmmaRing, RingFitsAndStaysAligned) {
  using Ring = TypeParam;
  EXPECT_LE(Ring::kSmemBytes + Ring::kStaticBytes, kWgSmemLimit);  // + barriers and item records: one CTA per SM
  for (int s = 0; s < Ring::kStages; ++s) {
    EXPECT_EQ(Ring::a_stage(s) % kSw128AtomBytes, 0u);
    EXPECT_EQ(Ring::b_stage(s) % kSw128AtomBytes, 0u);
    EXPECT_EQ((Ring::b_stage(s) + kWgHalfBRows * Ring::kRowBytes) % kSw128AtomBytes, 0u);
    EXPECT_LE(Ring::b_stage(s) + uint32_t(Ring::kBBytes), uint32_t(Ring::kStages * Ring::kStageBytes));
  }
  // The descriptor's layout field names the swizzle TMA writes (1: 128B, 2: 64B).
  EXPECT_EQ(Ring::desc(0) >> 62, Ring::kBK == 64 ? 1u : 2u);
  EXPECT_EQ((Ring::desc(0) >> 32) & 0x3FFFu, uint64_t(Ring::kAtomBytes >> 4));
}

// One stage of k = kBK for a gated CTA: tile rows x A[128][kBK], weights B[256][kBK] (gate rows 0..127,
// up rows 128..255). Small integers keep every float sum exact.
TYPED_TEST(MoeGroupedWgmmaRing, OneStageThroughDescriptorsGivesTheTileProduct) {
  using Ring = TypeParam;
  constexpr int kBK = Ring::kBK;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);
  std::vector<float> A(size_t(kWgTileRows) * kBK), B(size_t(kWgBRows) * kBK);
  for (auto& v : A) v = float(small(rng));
  for (auto& v : B) v = float(small(rng));
  for (uint32_t ring : {0u, 1024u, 3072u})
    for (int s = 0; s < Ring::kStages; ++s) {
      // Shared memory as bf16 slots indexed by byte address / 2 (NaN = never written).
      std::vector<float> smem(size_t(ring + Ring::kStages * Ring::kStageBytes) / 2, std::nanf(""));
      for (int t = 0; t < kWgProducerThreads; ++t)  // the producer's cp.async of 8 bf16 each
        for (int p = 0; p < Ring::kAPasses; ++p) {
          const int r = Ring::a_row(t, p), c = Ring::a_chunk(t);
          for (int e = 0; e < 8; ++e)
            smem[(ring + Ring::a_stage(s) + Ring::swizzled(r, c)) / 2 + size_t(e)] = A[size_t(r) * kBK + c * 8 + e];
        }
      for (int half = 0; half < 2; ++half)  // TMA: two boxes of 128 rows, each written with the swizzle
        for (int r = 0; r < kWgHalfBRows; ++r)
          for (int k = 0; k < kBK; ++k) {
            const uint32_t box = ring + Ring::b_stage(s) + uint32_t(half * kWgHalfBRows * Ring::kRowBytes);
            const uint32_t logical = box + uint32_t(r) * Ring::kRowBytes + uint32_t(k) * 2;
            smem[Ring::hw_address(logical) / 2] = B[size_t(half * kWgHalfBRows + r) * kBK + k];
          }
      for (int wg = 0; wg < kWgConsumerWarpgroups; ++wg) {
        std::vector<double> D(size_t(64) * kWgBRows, 0.0);
        for (int kk = 0; kk < kBK / 16; ++kk) {
          const uint64_t da = Ring::desc(ring + Ring::a_desc_offset(s, wg, kk));
          const uint64_t db = Ring::desc(ring + Ring::b_desc_offset(s, kk));
          for (int m = 0; m < 64; ++m)
            for (int n = 0; n < kWgBRows; ++n)
              for (int k = 0; k < 16; ++k)
                D[size_t(m) * kWgBRows + size_t(n)] += double(smem[Ring::operand_address(da, m, k) / 2]) *
                                                        double(smem[Ring::operand_address(db, n, k) / 2]);
        }
        auto want = [&](int row, int brow) {
          double v = 0;
          for (int k = 0; k < kBK; ++k) v += double(A[size_t(row) * kBK + k]) * double(B[size_t(brow) * kBK + k]);
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
