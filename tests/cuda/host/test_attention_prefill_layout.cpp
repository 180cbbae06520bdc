// Host checks of the prefill attention's index arithmetic (attention_prefill_layout.h), without a
// GPU: where the kernel's cp.async staging puts each K/V element against where wgmma reads
// operand element (n, k) through the kernel's descriptors (the PTX ISA's canonical
// 128-byte-swizzle layouts), the descriptor bit fields, one warpgroup's S = Q·Kᵀ and O = P·V
// replayed through those addresses, the S-to-P register reuse, and the key tiles, splits, skips
// and mask-free tiles the kernel derives from positions.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <vector>

#include "backends/cuda/attention/attention.h"
#include "backends/cuda/attention/attention_prefill_layout.h"

namespace striker::cuda::prefill {
namespace {

constexpr uint32_t kBase = 3 * kSw128AtomBytes;  // any 1024-byte aligned stage address

// Byte address the kernel's staging writes dim `dim` of tile key `key` to.
uint32_t staged_address(uint32_t tile, int key, int dim) {
  return tile + uint32_t(tile_offset(key, dim / 8) + (dim % 8) * 2);
}

TEST(PrefillAttentionLayout, KDescriptorsReadWhatStagingWrote) {
  for (int ks = 0; ks < kHeadDim / 16; ++ks)
    for (int key = 0; key < kKeyTile; ++key)
      for (int k = 0; k < 16; ++k)
        ASSERT_EQ(wgmma_operand_address(k_desc(kBase, ks), key, k), staged_address(kBase, key, 16 * ks + k))
            << "k step " << ks << " key " << key << " k " << k;
}

TEST(PrefillAttentionLayout, VDescriptorsReadWhatStagingWrote) {
  const uint32_t v = kBase + kTileBytes;
  for (int kt = 0; kt < kKeyTile / 16; ++kt)
    for (int dim = 0; dim < kHeadDim; ++dim)
      for (int k = 0; k < 16; ++k)
        ASSERT_EQ(wgmma_operand_address_mn(v_desc(v, kt), dim, k), staged_address(v, 16 * kt + k, dim))
            << "k step " << kt << " dim " << dim << " k " << k;
}

TEST(PrefillAttentionLayout, DescriptorBitFields) {
  const uint32_t v = 200 * 1024, k = 64 * 1024;
  const uint64_t dv = v_desc(v, 3), dk = k_desc(k, 5);
  EXPECT_EQ(dv & 0x3FFF, (v + 3 * 2048) >> 4);
  EXPECT_EQ((dv >> 16) & 0x3FFF, uint64_t(kHalfBytes) >> 4);  // leading: dims 0-63 -> 64-127
  EXPECT_EQ((dv >> 32) & 0x3FFF, 1024u >> 4);                  // stride: 8 keys
  EXPECT_EQ(dk & 0x3FFF, (k + kHalfBytes + 32) >> 4);           // k step 5: half 1, 32 bytes in
  EXPECT_EQ((dk >> 32) & 0x3FFF, 1024u >> 4);
  for (uint64_t d : {dv, dk}) {
    EXPECT_EQ((d >> 49) & 0x7, 0u);  // base offset: tiles are 1024-byte aligned
    EXPECT_EQ(d >> 62, 1u);          // 128-byte swizzle
  }
  // Every field fits its 14 bits for the whole 227 KiB of shared memory.
  static_assert((kHalfBytes >> 4) < (1 << 14) && ((kSmemBytes + 1024) >> 4) < (1 << 14));
  static_assert(kSmemBytes <= 227 * 1024, "over the opt-in shared memory limit");
  static_assert(kStageBytes % kSw128AtomBytes == 0 && kTileBytes % kSw128AtomBytes == 0,
                "stages and tiles must stay 1024-byte aligned");
}

TEST(PrefillAttentionLayout, StagingCoversEachKeyChunkOnce) {
  std::vector<int> hits(size_t(kKeyTile) * kChunks, 0);
  for (int pass = 0; pass < kProducerPasses; ++pass)
    for (int tid = 0; tid < kProducerThreads; ++tid) {
      const int key = stage_key(tid, pass);
      ASSERT_LT(key, kKeyTile);
      ++hits[size_t(key) * kChunks + size_t(stage_chunk(tid))];
    }
  for (size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i], 1) << "key " << i / kChunks << " chunk " << i % kChunks;
}

// One warpgroup (64 rows: warp wi of it holds rows 16wi + g and 16wi + g + 8, the m16n8k16
// fragment layout wgmma's register A and fp32 D use) multiplies Q by the staged K tile and P by
// the staged V tile, reading B element (n, k) at the descriptor's canonical address.
TEST(PrefillAttentionLayout, OneWarpgroupReplaysScoresAndValues) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);  // exact in float sums
  std::vector<float> smem(size_t(kBase + kStageBytes) / 2, 0.f);  // indexed by byte address / 2
  std::vector<float> K(size_t(kKeyTile) * kHeadDim), V(K.size());
  for (int key = 0; key < kKeyTile; ++key)
    for (int dim = 0; dim < kHeadDim; ++dim) {
      K[size_t(key) * kHeadDim + size_t(dim)] = float(small(rng));
      V[size_t(key) * kHeadDim + size_t(dim)] = float(small(rng));
      smem[staged_address(kBase, key, dim) / 2] = K[size_t(key) * kHeadDim + size_t(dim)];
      smem[staged_address(kBase + kTileBytes, key, dim) / 2] = V[size_t(key) * kHeadDim + size_t(dim)];
    }
  for (int wgi = 0; wgi < kWarpgroups; ++wgi) {
    // Row r of the warpgroup = warp 4wgi + r/16, half (r%16)/8, head r%8.
    auto token_of = [&](int r) { return row_token(4 * wgi + r / 16, (r % 16) / 8); };
    std::vector<float> Q(size_t(64) * kHeadDim), P(size_t(64) * kKeyTile);
    for (auto& v : Q) v = float(small(rng));
    for (auto& v : P) v = float(small(rng));
    for (int r = 0; r < 64; ++r) {
      ASSERT_GE(token_of(r), wg_first_token(wgi));
      ASSERT_LE(token_of(r), wg_last_token(wgi));
    }
    for (int r = 0; r < 64; ++r)
      for (int n = 0; n < kKeyTile; ++n) {
        float s = 0, want = 0;
        for (int ks = 0; ks < kHeadDim / 16; ++ks)
          for (int k = 0; k < 16; ++k)
            s += Q[size_t(r) * kHeadDim + size_t(16 * ks + k)] *
                 smem[wgmma_operand_address(k_desc(kBase, ks), n, k) / 2];
        for (int dim = 0; dim < kHeadDim; ++dim)
          want += Q[size_t(r) * kHeadDim + size_t(dim)] * K[size_t(n) * kHeadDim + size_t(dim)];
        ASSERT_EQ(s, want) << "S row " << r << " key " << n;
      }
    for (int r = 0; r < 64; ++r)
      for (int dim = 0; dim < kHeadDim; ++dim) {
        float o = 0, want = 0;
        for (int kt = 0; kt < kKeyTile / 16; ++kt)
          for (int k = 0; k < 16; ++k)
            o += P[size_t(r) * kKeyTile + size_t(16 * kt + k)] *
                 smem[wgmma_operand_address_mn(v_desc(kBase + kTileBytes, kt), dim, k) / 2];
        for (int key = 0; key < kKeyTile; ++key)
          want += P[size_t(r) * kKeyTile + size_t(key)] * V[size_t(key) * kHeadDim + size_t(dim)];
        ASSERT_EQ(o, want) << "O row " << r << " dim " << dim;
      }
  }
}

// For random tiles, windows and split plans: walking each split's 128-key tiles as the kernel
// does (warpgroup skips, mask-free tiles) shows each query exactly the keys lo(p)..p, once.
TEST(PrefillAttentionLayout, TilesSkipsAndMaskFreeTilesCoverEachQueryRangeOnce) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 600; ++trial) {
    const int window = std::array<int, 5>{0, 513, 17, 1, 129}[size_t(trial % 5)];
    const int p0 = std::uniform_int_distribution<int>(0, trial % 3 == 0 ? 40 : 5000)(rng);
    const int n = std::uniform_int_distribution<int>(1, kTokens)(rng);
    const int max_keys = window > 0 ? std::min(p0 + n, window) : p0 + n;
    const SplitPlan sp = plan_key_splits(max_keys + kTokens - 1, 1, 1 + trial % 200, 1 + trial % 50);
    ASSERT_EQ(sp.chunk % kKeyTile, 0);
    ASSERT_GE(sp.splits * sp.chunk, int64_t(max_keys + kTokens - 1));
    for (int t = 0; t < n; ++t) {
      const int p = p0 + t, wgi = t / kTokensPerWarpgroup;
      const int pos_first = p0 + wg_first_token(wgi), pos_last = p0 + wg_last_token(wgi);
      std::vector<int> seen(size_t(p + 1), 0);
      for (int split = 0; split < sp.splits; ++split) {
        const KeyRange r = cta_key_range(p0, n, window, split, int(sp.chunk));
        for (int kb = r.begin; kb < r.end; kb += kKeyTile) {
          const bool needed = tile_needed(kb, pos_first, pos_last, window);
          const bool unmasked = tile_unmasked(kb, pos_first, pos_last, window, r);
          const KeyInterval v = visible_keys(p, window, r);
          for (int key = kb; key < kb + kKeyTile; ++key) {
            const bool visible = key_visible(key, p, window, r);
            ASSERT_EQ(visible, key >= v.lo && key <= v.hi) << "interval of p " << p << " at key " << key;
            if (unmasked) ASSERT_TRUE(visible) << "mask-free tile at " << kb << " hides key " << key << " from " << p;
            if (visible) {
              ASSERT_TRUE(needed) << "warpgroup skipped a visible key tile at " << kb << " (p " << p << ")";
              ++seen[size_t(key)];
            }
          }
        }
      }
      for (int key = 0; key <= p; ++key)
        ASSERT_EQ(seen[size_t(key)], key >= key_lo(p, window) ? 1 : 0)
            << "p0 " << p0 << " n " << n << " window " << window << " query " << t << " key " << key;
    }
  }
}

// A long prefix is almost all mask-free tiles: only the diagonal tile(s) need the mask.
TEST(PrefillAttentionLayout, LongPrefixTilesAreMaskFree) {
  const int p0 = 90000, n = kTokens;
  const KeyRange r = cta_key_range(p0, n, 0, 0, 1 << 20);
  int masked = 0, tiles = 0;
  for (int kb = r.begin; kb < r.end; kb += kKeyTile, ++tiles)
    for (int wgi = 0; wgi < kWarpgroups; ++wgi)
      masked += !tile_unmasked(kb, p0 + wg_first_token(wgi), p0 + wg_last_token(wgi), 0, r);
  EXPECT_EQ(tiles, (p0 + n + kKeyTile - 1) / kKeyTile);
  EXPECT_LE(masked, 2 * kWarpgroups);
}

// The S accumulators handed to P·V as its A operand (p_reg_tile / p_reg_elem) hold exactly the
// (row, key) pairs the A fragment layout asks for (q_frag_half / q_frag_dim, the layout Q is
// loaded in): register r of k step kt = rows g + 8(r & 1), keys 16kt + 2c + 8(r >> 1) and +1.
TEST(PrefillAttentionLayout, ScoreAccumulatorsAreThePValueAFragment) {
  for (int lane = 0; lane < 32; ++lane)
    for (int kt = 0; kt < kKeyTile / 16; ++kt)
      for (int r = 0; r < 4; ++r) {
        const int tile = p_reg_tile(kt, r), elem = p_reg_elem(r);
        EXPECT_EQ(acc_half(elem), q_frag_half(r));
        EXPECT_EQ(acc_half(elem + 1), q_frag_half(r));
        EXPECT_EQ(8 * tile + acc_col(lane, elem), q_frag_dim(lane, kt, r)) << "lane " << lane << " r " << r;
        EXPECT_EQ(8 * tile + acc_col(lane, elem + 1), q_frag_dim(lane, kt, r) + 1);
      }
}

TEST(PrefillAttentionLayout, SplitPlanOnlySplitsWhenTilesAreFew) {
  EXPECT_EQ(plan_key_splits(8192 + 15, 2048, 396, 2).splits, 1);      // 8K prefill: many CTAs
  EXPECT_EQ(plan_key_splits(100000 + 15, 8, 396, 1000).splits, 49);   // 50 wanted; 2048-key chunks give 49
  EXPECT_EQ(plan_key_splits(100000 + 15, 8, 396, 0).splits, 1);       // no scratch
  EXPECT_EQ(plan_key_splits(16, 1, 396, 1000).splits, 1);             // one key tile cannot split
}

TEST(PrefillAttentionLayout, TilesCoverEachQueryOnce) {
  for (int count : {1, 15, 16, 17, 300, 2049}) {
    std::vector<int32_t> tiles;
    append_prefill_tiles(7, count, tiles);
    ASSERT_EQ(tiles.size() % 2, 0u);
    int next = 7;
    for (size_t i = 0; i < tiles.size(); i += 2) {
      EXPECT_EQ(tiles[i], next);
      EXPECT_GE(tiles[i + 1], 1);
      EXPECT_LE(tiles[i + 1], kTokens);
      next += tiles[i + 1];
    }
    EXPECT_EQ(next, 7 + count);
  }
}

}  // namespace
}  // namespace striker::cuda::prefill
