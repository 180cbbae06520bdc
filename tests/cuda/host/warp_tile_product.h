// One warp's accumulators after a k tile of the grouped MoE kernels (warp_tile_mma's layout: m
// tile m, n tile t, columns wn..wn+15 of the block for warp wn / 16) against the plain product
// A · Wᵀ of that tile, for the host replays of the kernels' fragment formulas.
#pragma once
#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

#include "backends/cuda/moe/moe_grouped_layout.h"
#include "ptx_fragments.h"

namespace striker::cuda::ptx_host {

// A is [TM][kBK] and W [kBN][kBK], both row-major; small integers keep the float sums exact.
template <int TM>
void expect_warp_tile_product(const Acc (&acc)[TM / 16][2], const std::vector<float>& A, const std::vector<float>& W,
                              int warp) {
  const int wn = warp * 16;
  for (int m = 0; m < TM / 16; ++m)
    for (int t = 0; t < 2; ++t)
      for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 4; ++i) {
          const int row = m * 16 + c_frag_row(lane, i), col = wn + t * 8 + c_frag_col(lane, i);
          float want = 0;
          for (int k = 0; k < kBK; ++k) want += A[size_t(row) * kBK + k] * W[size_t(col) * kBK + k];
          ASSERT_EQ(acc[m][t][size_t(lane)][size_t(i)], want)
              << "warp " << warp << " m " << m << " n tile " << t << " lane " << lane << " element " << i;
        }
}

}  // namespace striker::cuda::ptx_host
