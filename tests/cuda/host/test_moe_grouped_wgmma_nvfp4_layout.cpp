// Host replay of the NVFP4 grouped GEMM with A and B swapped (moe_grouped_wgmma_nvfp4.cu): the
// register decode of nvfp4_bf16_bits.h (the kernel's own code) against the scalar NVFP4 codec
// over every code nibble and scale byte; the A fragment's (row, k) positions as the PTX ISA lays
// out wgmma's register A (the mma.m16n8k16 A layout per warp) against the code bytes the thread
// decodes; the fragment rows of the two warpgroups (every staged row once, gate and up rows of a
// column in one thread); the producer's copies (every chunk once); the stage layout.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "backends/cuda/moe/moe_grouped_wgmma_nvfp4_layout.h"
#include "backends/cuda/nvfp4/nvfp4_bf16_bits.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "core/bf16.h"

namespace striker::cuda {
namespace {

float bf16_half(uint32_t word, int half) { return bf16_to_float(bf16{uint16_t(word >> (16 * half))}); }

// The codec's value of weight `k` (0..15) of a one-group row with these 8 code bytes and scale.
float codec_weight(const uint8_t (&codes)[8], uint8_t scale, int k) {
  Nvfp4HostMatrix m;
  m.codes.assign(codes, codes + 8);
  m.scales.assign(1, scale);
  return nvfp4_dequantize_ref(m, 1, 16)[size_t(k)];
}

TEST(MoeGroupedWgmmaNvfp4Layout, E2m1TableDecodesEveryNibbleQuad) {
  const float e2m1[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  for (uint32_t p = 0; p < 0x10000u; ++p) {
    uint32_t lo, hi;
    e2m1x4_to_bf16x2(p | 0xABCD0000u, lo, hi);  // the high bits must not matter
    const uint32_t words[2] = {lo, hi};
    for (int j = 0; j < 4; ++j) {
      const uint32_t nib = (p >> (4 * j)) & 0xFu;
      const float want = (nib & 8u) ? -e2m1[nib & 7u] : e2m1[nib & 7u];
      const uint32_t bits = (words[j / 2] >> (16 * (j % 2))) & 0xFFFFu;
      ASSERT_EQ(bf16_to_float(bf16{uint16_t(bits)}), want) << std::hex << "p " << p << " weight " << j;
      ASSERT_EQ((bits >> 15) != 0, (nib & 8u) != 0) << std::hex << "sign of p " << p << " weight " << j;
    }
  }
}

TEST(MoeGroupedWgmmaNvfp4Layout, ScaleBytesDecodeAsTheCodec) {
  const uint8_t one[8] = {0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22};  // E2M1 code 2 = 1.0
  for (uint32_t b = 0; b < 256; ++b) {
    const float want = codec_weight(one, uint8_t(b), 0);
    EXPECT_EQ(bf16_half(ue4m3_bf16_bits(b), 0), want) << "scale byte " << b;
    EXPECT_EQ(float_to_bf16(want).bits, uint16_t(ue4m3_bf16_bits(b))) << "scale byte " << b;
    EXPECT_EQ(ue4m3_bf16x2_bits(b), ue4m3_bf16_bits(b) * 0x10001u) << "branch-free form, scale byte " << b;
  }
}

// PTX ISA, wgmma register A (.bf16): per warp the m16n8k16 A layout; register r (0..3) of lane
// holds row lane/4 + 8·(r % 2), k = 2·(lane % 4) + 8·(r / 2) + half.
int frag_row(int lane, int r) { return lane / 4 + 8 * (r % 2); }
int frag_k(int lane, int r, int half) { return 2 * (lane % 4) + 8 * (r / 2) + half; }

TEST(MoeGroupedWgmmaNvfp4Layout, FragmentHoldsTheCodecWeightsAtTheirPtxPositions) {
  std::mt19937 rng(71);
  for (int trial = 0; trial < 4096; ++trial) {
    uint8_t codes[2][8];  // rows g and g + 8 of a lane's quad: one 16-weight group each
    for (auto& row : codes)
      for (auto& b : row) b = uint8_t(rng());
    const uint8_t scale[2] = {uint8_t(trial % 256), uint8_t(rng())};
    uint32_t w[2][2];
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < 2; ++i) std::memcpy(&w[h][i], codes[h] + 4 * i, 4);  // little-endian words
    const uint32_t sg = ue4m3_bf16_bits(scale[0]) * 0x10001u, sh = ue4m3_bf16_bits(scale[1]) * 0x10001u;
    for (int lane = 0; lane < 32; ++lane) {
      uint32_t a[4];
      nvfp4_a_fragment(w[0][0], w[0][1], w[1][0], w[1][1], sg, sh, lane % 4, a);
      for (int r = 0; r < 4; ++r)
        for (int half = 0; half < 2; ++half) {
          const int h = frag_row(lane, r) / 8;  // 0: row g, 1: row g + 8
          const float want = codec_weight(codes[h], scale[h], frag_k(lane, r, half));
          ASSERT_EQ(bf16_half(a[r], half), want) << "trial " << trial << " lane " << lane << " reg " << r;
        }
    }
  }
}

// Every staged weight row is one fragment row of one thread position; gated, fragment rows f and
// f + 8 are the gate and up rows of the same output column.
TEST(MoeGroupedWgmmaNvfp4Layout, FragmentRowsCoverTheStagedRowsOnce) {
  for (bool gated : {false, true}) {
    std::set<int> rows, cols;
    for (int wg = 0; wg < kNvConsumerWarpgroups; ++wg)
      for (int mb = 0; mb < 2; ++mb)
        for (int w = 0; w < 4; ++w)
          for (int f = 0; f < 16; ++f) {
            const int r = nv_frag_wrow(gated, wg, mb, w, f);
            ASSERT_TRUE(r >= 0 && r < kNvWRows);
            ASSERT_TRUE(rows.insert(r).second) << "row " << r << " twice";
            cols.insert(nv_frag_col(gated, wg, mb, w, f));
            if (gated && f < 8) {
              EXPECT_EQ(nv_frag_wrow(true, wg, mb, w, f + 8), r + kNvWRows / 2);  // up row of the same column
              EXPECT_EQ(nv_frag_col(true, wg, mb, w, f + 8), nv_frag_col(true, wg, mb, w, f));
              EXPECT_EQ(nv_frag_col(true, wg, mb, w, f), r);  // gate row r is column r
            }
            if (!gated) EXPECT_EQ(nv_frag_col(false, wg, mb, w, f), r);
            // The kernel addresses rows f + 8 and block 1 by fixed offsets from row f of block 0.
            EXPECT_EQ(r, nv_frag_wrow(gated, wg, 0, w, f % 8) +
                             (f / 8) * (nv_frag_wrow(gated, 0, 0, 0, 8) - nv_frag_wrow(gated, 0, 0, 0, 0)) +
                             mb * (nv_frag_wrow(gated, 0, 1, 0, 0) - nv_frag_wrow(gated, 0, 0, 0, 0)));
          }
    EXPECT_EQ(rows.size(), size_t(kNvWRows));
    EXPECT_EQ(cols.size(), size_t(nv_out_cols(gated)));
    EXPECT_EQ(*cols.rbegin(), nv_out_cols(gated) - 1);
  }
}

TEST(MoeGroupedWgmmaNvfp4Layout, ProducerCopiesEveryChunkOnce) {
  std::set<std::pair<int, int>> x_chunks;
  std::set<int> scale_rows;
  for (int t = 0; t < kNvProducerThreads; ++t) {
    for (int p = 0; p < 2; ++p) {
      const int r = nv_scale_row(t, p);
      EXPECT_EQ(r >= kNvWRows / 2, p == 1);  // gated: pass 1 reads the up stack's scales
      ASSERT_TRUE(scale_rows.insert(r).second);
    }
    for (int p = 0; p < kNvXPasses; ++p) ASSERT_TRUE(x_chunks.insert({nv_x_row(t, p), nv_x_chunk(t)}).second);
  }
  EXPECT_EQ(scale_rows.size(), size_t(kNvWRows));
  EXPECT_EQ(x_chunks.size(), size_t(kNvTokens * 8));
  EXPECT_EQ(*x_chunks.rbegin(), std::make_pair(kNvTokens - 1, 7));
  // The two code boxes fill the stage's code rows exactly (TMA writes a box row after row).
  EXPECT_EQ(2 * (kNvWRows / 2) * kNvCodeRowBytes, kNvCodeBytes);
}

// The epilogue's staging passes: every (token, column) of a warpgroup's 128 × 64 tile written
// once per pass, at the output column the fragment row stands for; a warp's 2-byte stores
// (fixed register) hit each bank with one 4-byte word at most.
TEST(MoeGroupedWgmmaNvfp4Layout, EpilogueStagingCoversTheTileWithoutBankConflicts) {
  for (bool gated : {false, true})
    for (int wg = 0; wg < kNvConsumerWarpgroups; ++wg)
      for (int pass = 0; pass < (gated ? 1 : 2); ++pass) {
        std::set<std::pair<int, int>> seen;
        for (int mb = 0; mb < 2; ++mb) {
          if (!gated && mb != pass) continue;  // plain: one block per pass
          for (int w = 0; w < 4; ++w)
            for (int h = 0; h < (gated ? 1 : 2); ++h)
              for (int j = 0; j < 16; ++j)
                for (int e = 0; e < 2; ++e) {
                  std::vector<std::set<uint32_t>> bank_words(32);
                  for (int lane = 0; lane < 32; ++lane) {
                    const int f = lane / 4 + 8 * h, c = lane % 4, tok = 8 * j + 2 * c + e;
                    const int col = nv_epi_col(gated, mb, w, f);
                    ASSERT_TRUE(col >= 0 && col < kNvEpiCols);
                    EXPECT_EQ(nv_epi_col0(gated, wg, mb) + col, nv_frag_col(gated, wg, mb, w, f));
                    ASSERT_TRUE(seen.insert({tok, col}).second) << "token " << tok << " column " << col;
                    const uint32_t addr = uint32_t(tok * kNvEpiPitch + col * 2);
                    bank_words[(addr / 4) % 32].insert(addr / 4);
                  }
                  for (const auto& words : bank_words) EXPECT_LE(words.size(), 1u);
                }
        }
        EXPECT_EQ(seen.size(), size_t(kNvTokens * kNvEpiCols)) << (gated ? "gated" : "plain") << " pass " << pass;
      }
}

// Work items over routing tiles of 128 rows: every (tile, column block) once, an expert's items
// consecutive.
TEST(MoeGroupedWgmmaNvfp4Layout, WorkItemsCoverTilesAndColumnBlocks) {
  for (int col_blocks : {1, 4, 8}) {
    std::set<std::pair<int, int>> seen;
    const int tiles = 7;
    for (int item = 0; item < tiles * col_blocks; ++item) {
      const NvItem it = nv_item(item, col_blocks);
      ASSERT_TRUE(it.tile < tiles && it.col_block < col_blocks);
      ASSERT_TRUE(seen.insert({it.tile, it.col_block}).second);
      EXPECT_EQ(it.tile, item / col_blocks);  // tile-major
    }
  }
}

TEST(MoeGroupedWgmmaNvfp4Layout, StageLayout) {
  for (int s = 0; s < kNvStages; ++s) {
    EXPECT_EQ(nv_x_stage(s) % kSw128AtomBytes, 0u);  // the swizzle keys on address bits 7-9
    EXPECT_EQ(nv_codes_stage(s) % 128, 0u);  // TMA destination
    EXPECT_EQ((nv_codes_stage(s) + (kNvWRows / 2) * kNvCodeRowBytes) % 128, 0u);
    EXPECT_EQ(nv_scales_bf16_stage(s) % 16, 0u);
    EXPECT_EQ(nv_codes_stage(s), nv_x_stage(s) + kNvXBytes);
    EXPECT_LE(nv_scales_bf16_stage(s) + kNvScaleBf16Bytes, nv_x_stage(s + 1));
  }
  EXPECT_EQ(nv_epi_offset(0), uint32_t(kNvStages * kNvStageBytes));
  EXPECT_EQ(nv_epi_offset(1) % 16, 0u);
  EXPECT_EQ(kNvEpiPitch % 16, 0);  // 16-byte row chunks read back
  EXPECT_LE(nv_epi_offset(kNvConsumerWarpgroups) + kSw128AtomBytes, uint32_t(kNvSmemBytes));
  EXPECT_LE(kNvSmemBytes, 227 * 1024);
}

}  // namespace
}  // namespace striker::cuda
