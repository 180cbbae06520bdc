// The PTX ISA's definitions of ldmatrix.sync.aligned.m8n8.x4[.trans].b16 and mma.m16n8k16.row.col
// (bf16 inputs, fp32 accumulators), replayed on the host for one warp: the host tests feed them
// the kernels' own index helpers, so a slip in a fragment or swizzle formula shows as a wrong
// product without a GPU.
#pragma once
#include <array>
#include <cstddef>
#include <functional>
#include <vector>

namespace striker::cuda::ptx_host {

using Reg = std::array<float, 2>;  // one .b32 register: two b16 elements (low half first)
using Regs4 = std::array<Reg, 4>;
using Acc = std::array<std::array<float, 4>, 32>;  // one m16n8 fp32 accumulator tile, per lane

// ldmatrix.sync.aligned.m8n8.x4[.trans].b16: lanes 8q..8q+7 give the row addresses of matrix q.
// Without .trans lane t receives, in register q, row t/4 of matrix q, elements 2(t%4), 2(t%4)+1;
// with .trans it receives column t/4, rows 2(t%4) and 2(t%4)+1.
inline std::array<Regs4, 32> ldmatrix_x4(const std::vector<float>& smem, const std::function<int(int)>& row_address,
                                         bool trans = false) {
  std::array<Regs4, 32> out{};
  for (int q = 0; q < 4; ++q)
    for (int t = 0; t < 32; ++t) {
      if (!trans) {
        const int row = row_address(8 * q + t / 4);
        out[size_t(t)][size_t(q)] = {smem[size_t(row + 2 * (t % 4))], smem[size_t(row + 2 * (t % 4) + 1)]};
      } else {
        const int r0 = row_address(8 * q + 2 * (t % 4)), r1 = row_address(8 * q + 2 * (t % 4) + 1);
        out[size_t(t)][size_t(q)] = {smem[size_t(r0 + t / 4)], smem[size_t(r1 + t / 4)]};
      }
    }
  return out;
}

// mma.m16n8k16.row.col: A regs {(g, 2c..), (g+8, 2c..), (g, 2c+8..), (g+8, 2c+8..)}; B regs
// {(k 2c.., n g), (k 2c+8.., n g)}; D element i at row g + 8·(i >= 2), column 2c + (i & 1)
// (g = lane/4, c = lane%4).
inline void mma(Acc& d, const std::array<Regs4, 32>& a, const std::array<Reg, 32>& b0, const std::array<Reg, 32>& b1) {
  float A[16][16], B[16][8];
  for (int t = 0; t < 32; ++t) {
    const int g = t / 4, c = t % 4;
    for (int e = 0; e < 2; ++e) {
      A[g][2 * c + e] = a[size_t(t)][0][size_t(e)];
      A[g + 8][2 * c + e] = a[size_t(t)][1][size_t(e)];
      A[g][2 * c + 8 + e] = a[size_t(t)][2][size_t(e)];
      A[g + 8][2 * c + 8 + e] = a[size_t(t)][3][size_t(e)];
      B[2 * c + e][g] = b0[size_t(t)][size_t(e)];
      B[2 * c + 8 + e][g] = b1[size_t(t)][size_t(e)];
    }
  }
  for (int t = 0; t < 32; ++t) {
    const int g = t / 4, c = t % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + (i >= 2 ? 8 : 0), col = 2 * c + (i & 1);
      float s = 0;
      for (int k = 0; k < 16; ++k) s += A[row][k] * B[k][col];
      d[size_t(t)][size_t(i)] += s;
    }
  }
}

}  // namespace striker::cuda::ptx_host
