// The Hopper layout arithmetic (wgmma_layout.h) checked on the host: the 128-byte swizzle a
// thread applies by hand matches what TMA writes (the address XOR), a wgmma descriptor of a k16
// step inside a swizzled tile addresses exactly the elements placed there, the descriptor's bit
// fields are where the PTX ISA puts them, and the accumulator fragment covers the 64×N tile once.
#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

#include "backends/cuda/common/wgmma_layout.h"

namespace striker::cuda {
namespace {

TEST(WgmmaLayout, HandSwizzleMatchesTheHardwareXor) {
  for (uint32_t base : {0u, 1024u, 9216u, 197632u - 1024u})
    for (int row = 0; row < 256; ++row)
      for (int chunk = 0; chunk < 8; ++chunk)
        for (int byte = 0; byte < 16; ++byte) {
          // TMA/wgmma see logical address base + row·128 + chunk·16 + byte, swizzled by the hardware.
          const uint32_t logical = base + uint32_t(row) * 128 + uint32_t(chunk) * 16 + uint32_t(byte);
          ASSERT_EQ(sw128_address(logical), base + sw128_offset(row, chunk) + uint32_t(byte))
              << "base " << base << " row " << row << " chunk " << chunk;
        }
}

TEST(WgmmaLayout, SwizzleIsAPermutationOfEachEightRowAtom) {
  std::set<uint32_t> seen;
  for (int row = 0; row < 8; ++row)
    for (int chunk = 0; chunk < 8; ++chunk) seen.insert(sw128_offset(row, chunk));
  EXPECT_EQ(seen.size(), 64u);
  EXPECT_EQ(*seen.rbegin(), uint32_t(kSw128AtomBytes - 16));
}

TEST(WgmmaLayout, DescriptorBitFields) {
  const uint64_t d = wgmma_desc_sw128(0x12340u);
  EXPECT_EQ(d & 0x3FFFu, 0x1234u);                 // start address >> 4
  EXPECT_EQ((d >> 16) & 0x3FFFu, 1u);              // leading byte offset (unused) >> 4
  EXPECT_EQ((d >> 32) & 0x3FFFu, 1024u >> 4);      // stride byte offset >> 4
  EXPECT_EQ((d >> 49) & 0x7u, 0u);                 // base offset
  EXPECT_EQ(d >> 62, 1u);                          // 128-byte swizzle
  EXPECT_EQ((d >> 14) & 0x3u, 0u);
  EXPECT_EQ((d >> 46) & 0x7u, 0u);
  EXPECT_EQ((d >> 52) & 0x3FFu, 0u);
}

// A 1024-aligned tile of R rows × 64 columns stored as TMA does (row r, column k at
// sw128_offset(r, k/8) + 2·(k%8)); the descriptor of rows r0.. (r0 % 8 == 0) at k16 step kk must
// read element (r0 + row, 16·kk + k) for every row < 64 (A) or < 256 (B) and k < 16.
TEST(WgmmaLayout, DescriptorStepsAddressTheStoredElements) {
  for (uint32_t base : {0u, 16384u, 65536u + 32768u})
    for (int rows : {64, 256})
      for (int r0 : {0, 64, 128})
        for (int kk = 0; kk < 4; ++kk) {
          const uint64_t desc = wgmma_desc_sw128(base + uint32_t(r0) * kSw128RowBytes + uint32_t(kk) * 32);
          for (int row = 0; row < rows; ++row)
            for (int k = 0; k < 16; ++k) {
              const int col = 16 * kk + k;
              const uint32_t stored = base + sw128_offset(r0 + row, col / 8) + uint32_t(col % 8) * 2;
              ASSERT_EQ(wgmma_operand_address(desc, row, k), stored)
                  << "base " << base << " r0 " << r0 << " kk " << kk << " row " << row << " k " << k;
            }
        }
}

TEST(WgmmaLayout, AccumulatorFragmentCoversTheTileOnce) {
  constexpr int kN = 256;
  std::set<std::pair<int, int>> seen;
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < kN / 2; ++i) {
      const int r = wgmma_acc_row(t, i), c = wgmma_acc_col(t, i);
      ASSERT_TRUE(r >= 0 && r < 64 && c >= 0 && c < kN) << t << " " << i;
      ASSERT_TRUE(seen.insert({r, c}).second) << "thread " << t << " register " << i << " repeats (" << r << "," << c
                                              << ")";
    }
  EXPECT_EQ(seen.size(), size_t(64 * kN));
  // Registers i and i+1 (i even) are adjacent columns of one row: the epilogue stores them as a bf16 pair.
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < kN / 2; i += 2) {
      EXPECT_EQ(wgmma_acc_row(t, i), wgmma_acc_row(t, i + 1));
      EXPECT_EQ(wgmma_acc_col(t, i) + 1, wgmma_acc_col(t, i + 1));
    }
}

// The two exchange steps of the epilogue's quad transpose, replayed over the 4 threads: thread q
// starts with m[b] = (its column pair q of block b) and must end with m[p] = (pair p of block q).
TEST(WgmmaLayout, QuadTransposeGivesEachThreadOneWholeBlock) {
  uint32_t m[4][4];
  for (int q = 0; q < 4; ++q)
    for (int b = 0; b < 4; ++b) m[q][b] = uint32_t(10 * b + q);  // block b, pair q
  for (int mask : {2, 1}) {
    uint32_t sent[4][2];
    for (int q = 0; q < 4; ++q)
      for (int x = 0; x < 2; ++x) sent[q][x] = m[q][quad_exchange_index(q, mask, x)];
    for (int q = 0; q < 4; ++q)
      for (int x = 0; x < 2; ++x) m[q][quad_exchange_index(q, mask, x)] = sent[q ^ mask][x];
  }
  for (int q = 0; q < 4; ++q)
    for (int p = 0; p < 4; ++p) EXPECT_EQ(m[q][p], uint32_t(10 * q + p)) << "thread " << q << " entry " << p;
  // Each step touches two distinct entries, and partners exchange the same entry positions.
  for (int mask : {2, 1})
    for (int q = 0; q < 4; ++q) {
      EXPECT_NE(quad_exchange_index(q, mask, 0), quad_exchange_index(q, mask, 1));
      for (int x = 0; x < 2; ++x) EXPECT_EQ(quad_exchange_index(q, mask, x) ^ quad_exchange_index(q ^ mask, mask, x), mask);
    }
}

}  // namespace
}  // namespace striker::cuda
