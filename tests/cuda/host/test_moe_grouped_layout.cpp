// Replays one warp of the grouped GEMM's inner step on the host: tiles stored with the kernel's
// swizzle, fragments fetched with its ldmatrix addresses, multiplied as the PTX ISA defines
// ldmatrix.x4 and mma.m16n8k16 (.row.col, bf16), and read back with its accumulator mapping.
// A slip in any of those formulas shows as a wrong product here, without a GPU.
#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <random>
#include <set>
#include <vector>

#include "backends/cuda/moe/moe_grouped_layout.h"
#include "ptx_fragments.h"
#include "warp_tile_product.h"

namespace striker::cuda {
namespace {

using namespace striker::cuda::ptx_host;  // Reg, Regs4, Acc, ldmatrix_x4, mma (ptx_fragments.h)

TEST(MoeGroupedLayout, OneWarpStepComputesTheTileProduct) {
  constexpr int TM = 64;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(-4, 4);  // exact in float sums
  std::vector<float> A(size_t(TM) * kBK), B(size_t(kBN) * kBK), sa(A.size()), sb(B.size());
  for (auto& v : A) v = float(small(rng));
  for (auto& v : B) v = float(small(rng));
  for (int r = 0; r < TM; ++r)
    for (int k = 0; k < kBK; ++k) sa[size_t(swizzled(r, k / 8) + k % 8)] = A[size_t(r) * kBK + k];
  for (int n = 0; n < kBN; ++n)
    for (int k = 0; k < kBK; ++k) sb[size_t(swizzled(n, k / 8) + k % 8)] = B[size_t(n) * kBK + k];
  for (int warp = 0; warp < kGroupedThreads / 32; ++warp) {
    const int wn = warp * 16;
    Acc acc[TM / 16][2] = {};
    for (int ks = 0; ks < kBK / 16; ++ks) {
      std::array<Regs4, 32> af[TM / 16];
      for (int m = 0; m < TM / 16; ++m)
        af[m] = ldmatrix_x4(sa, [&](int lane) { return swizzled(a_ldm_row(lane, m), a_ldm_chunk(lane, ks)); });
      const auto bf = ldmatrix_x4(sb, [&](int lane) { return swizzled(b_ldm_row(lane, wn), b_ldm_chunk(lane, ks)); });
      for (int m = 0; m < TM / 16; ++m)
        for (int t = 0; t < 2; ++t) {  // as warp_tile_mma: registers 2t and 2t+1 are b0, b1 of n tile t
          std::array<Reg, 32> b0, b1;
          for (int l = 0; l < 32; ++l) {
            b0[size_t(l)] = bf[size_t(l)][size_t(2 * t)];
            b1[size_t(l)] = bf[size_t(l)][size_t(2 * t + 1)];
          }
          mma(acc[m][t], af[m], b0, b1);
        }
    }
    expect_warp_tile_product<TM>(acc, A, B, warp);
  }
}

// The staging passes copy every (row, chunk) of an A tile (TM = 16 or 64 rows) and of a B tile
// exactly once.
TEST(MoeGroupedLayout, StagingPassesCoverEachTileChunkOnce) {
  for (int rows : {16, 64, kBN}) {
    std::vector<int> hits(size_t(rows) * 8, 0);
    for (int pass = 0; pass < rows / (kGroupedThreads / 8); ++pass)
      for (int tid = 0; tid < kGroupedThreads; ++tid) {
        const int r = stage_row(tid, pass);
        ASSERT_LT(r, rows);
        ++hits[size_t(r) * 8 + size_t(stage_chunk(tid))];
      }
    for (size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i], 1) << rows << "-row tile, row " << i / 8;
  }
}

// Each 8-lane phase of an ldmatrix reads eight 16-byte rows; they must fall in eight different
// 16-byte bank groups of the 128-byte shared-memory line (no bank conflicts).
TEST(MoeGroupedLayout, LdmatrixPhasesAreBankConflictFree) {
  for (int ks = 0; ks < kBK / 16; ++ks)
    for (int phase = 0; phase < 4; ++phase) {
      std::set<int> a_groups, b_groups;
      for (int l = 8 * phase; l < 8 * phase + 8; ++l) {
        a_groups.insert((swizzled(a_ldm_row(l, 1), a_ldm_chunk(l, ks)) / 8) % 8);
        b_groups.insert((swizzled(b_ldm_row(l, 32), b_ldm_chunk(l, ks)) / 8) % 8);
      }
      EXPECT_EQ(a_groups.size(), 8u) << "A, k step " << ks << ", phase " << phase;
      EXPECT_EQ(b_groups.size(), 8u) << "B, k step " << ks << ", phase " << phase;
    }
}

}  // namespace
}  // namespace striker::cuda
