// Host checks of x_piece_slot (activation_pieces.h), the order in which the NVFP4 norm-inside GEMVs keep their
// shared-memory x row: the pieces stay inside their 64-byte chunk, the block norm's stores of a warp (32
// consecutive elements) stay in 64 contiguous bytes, and the dot products' 16-byte loads (lane c: pieces
// 4c..4c+3) put each quarter warp on 8 distinct 16-byte bank groups — which element order does not.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "backends/cuda/common/activation_pieces.h"

namespace striker::cuda {
namespace {

constexpr int kPieces = 2048 / 8;  // Flint's hidden row (the block norm's largest)

// Most lanes of one quarter warp on one 16-byte bank group (1: conflict-free).
int quarter_warp_ways(int first_chunk, int i, bool swizzled) {
  int most = 0;
  for (int phase = 0; phase < 4; ++phase) {
    int count[8] = {};
    for (int l = 8 * phase; l < 8 * phase + 8; ++l) {
      const int u = 4 * (first_chunk + l) + i;
      const int group = (swizzled ? x_piece_slot(u) : u) % 8;
      most = std::max(most, ++count[group]);
    }
  }
  return most;
}

TEST(ActivationPieces, PermutesPiecesInsideEachChunk) {
  std::set<int> slots;
  for (int u = 0; u < kPieces; ++u) {
    EXPECT_EQ(x_piece_slot(u) / 4, u / 4) << "piece " << u << " left its 64-byte chunk";
    slots.insert(x_piece_slot(u));
  }
  EXPECT_EQ(slots.size(), size_t(kPieces));
  for (int m = 0; m < kPieces * 8 / 32; ++m) {  // a warp's stores of elements 32m..32m+31
    std::set<int> at;
    for (int e = 32 * m; e < 32 * m + 32; ++e) at.insert(x_piece_slot(e / 8) * 8 + e % 8);
    EXPECT_EQ(*at.begin(), 32 * m);
    EXPECT_EQ(*at.rbegin(), 32 * m + 31) << "stores of elements " << 32 * m << ".. leave their 64 bytes";
  }
}

TEST(ActivationPieces, DotProductLoadsAreBankConflictFree) {
  for (int first_chunk = 0; first_chunk + 32 <= kPieces / 4; first_chunk += 32)  // lane c's chunk c + 32k
    for (int i = 0; i < 4; ++i) {
      const std::string what = "chunks from " + std::to_string(first_chunk) + ", piece " + std::to_string(i);
      EXPECT_EQ(quarter_warp_ways(first_chunk, i, true), 1) << what;
      EXPECT_EQ(quarter_warp_ways(first_chunk, i, false), 4) << what << " (element order's conflict)";
    }
}

}  // namespace
}  // namespace striker::cuda
