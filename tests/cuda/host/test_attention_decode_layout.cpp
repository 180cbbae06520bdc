// Host checks of the pipelined decode attention's index arithmetic (attention_decode_layout.h),
// without a GPU: cp.async staging coverage, shared-memory bank conflicts of the swizzled K and V
// tiles, one warp's S = Q·Kᵀ and O = P·V replayed through mma.m16n8k16 as the PTX ISA defines it
// (fragments read from the swizzled tiles exactly as the kernel reads them), the block-table
// lookups of a 16-key tile, the warps' tile counts and the split plan (counts, key ranges).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backends/cuda/attention/attention_decode_layout.h"
#include "ptx_fragments.h"

namespace striker::cuda::decode {
namespace {

using namespace ptx_host;  // Reg, Regs4, Acc, mma (ptx_fragments.h)

TEST(DecodeAttentionLayout, StagingCoversEveryChunkOnceAndSwizzlesArePermutations) {
  std::set<std::pair<int, int>> seen;
  for (int j = 0; j < kStagePasses; ++j)
    for (int lane = 0; lane < 32; ++lane) {
      const int r = stage_row(lane, j), ch = stage_chunk(lane);
      ASSERT_TRUE(r >= 0 && r < kTileKeys && ch >= 0 && ch < kChunks) << "pass " << j << " lane " << lane;
      EXPECT_TRUE(seen.insert({r, ch}).second) << "row " << r << " chunk " << ch << " staged twice";
    }
  EXPECT_EQ(seen.size(), size_t(kTileKeys * kChunks));
  for (int r = 0; r < kTileKeys; ++r) {
    std::set<int> k_pos, v_pos;
    for (int ch = 0; ch < kChunks; ++ch) {
      const int k = k_swizzled(r, ch), v = v_swizzled(r, ch);
      EXPECT_TRUE(k >= r * kHeadDim && k < (r + 1) * kHeadDim && k % 8 == 0) << "K row " << r << " chunk " << ch;
      EXPECT_TRUE(v >= r * kHeadDim && v < (r + 1) * kHeadDim && v % 8 == 0) << "V row " << r << " chunk " << ch;
      k_pos.insert(k);
      v_pos.insert(v);
    }
    EXPECT_EQ(k_pos.size(), size_t(kChunks)) << "K swizzle of row " << r << " is not a permutation";
    EXPECT_EQ(v_pos.size(), size_t(kChunks)) << "V swizzle of row " << r << " is not a permutation";
  }
}

// A 16-byte access per lane is served 8 lanes at a time; the 8 must use 8 different 16-byte
// bank groups (element offset / 8, mod 8) to be conflict-free.
void expect_conflict_free(const std::array<int, 32>& offsets, const std::string& what) {
  for (int phase = 0; phase < 4; ++phase) {
    std::set<int> groups;
    for (int l = 8 * phase; l < 8 * phase + 8; ++l) groups.insert((offsets[size_t(l)] / 8) % 8);
    EXPECT_EQ(groups.size(), 8u) << what << " phase " << phase << ": bank conflict";
  }
}

TEST(DecodeAttentionLayout, FragmentReadsAndStagingWritesAreBankConflictFree) {
  std::array<int, 32> off{};
  for (int t = 0; t < 2; ++t)
    for (int pp = 0; pp < 4; ++pp) {
      for (int l = 0; l < 32; ++l) off[size_t(l)] = k_swizzled(k_frag_row(l, t), k_frag_chunk(l, pp));
      expect_conflict_free(off, "K read t=" + std::to_string(t) + " pp=" + std::to_string(pp));
    }
  for (int r = 0; r < 4; ++r)
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < 32; ++l) off[size_t(l)] = v_swizzled(v_frag_row(l, r), v_frag_chunk(l, h));
      expect_conflict_free(off, "V read r=" + std::to_string(r) + " h=" + std::to_string(h));
    }
  for (int j = 0; j < kStagePasses; ++j) {
    for (int l = 0; l < 32; ++l) off[size_t(l)] = k_swizzled(stage_row(l, j), stage_chunk(l));
    expect_conflict_free(off, "K stage pass " + std::to_string(j));
    for (int l = 0; l < 32; ++l) off[size_t(l)] = v_swizzled(stage_row(l, j), stage_chunk(l));
    expect_conflict_free(off, "V stage pass " + std::to_string(j));
  }
}

// One warp, one 16-key tile: Q (8 heads), K and V staged into swizzled tiles the way the
// cp.async passes write them; K pieces and V pieces read back with the kernel's fragment helpers
// and fed to mma exactly as decode::tile_update does. Integer-valued data: sums are exact.
TEST(DecodeAttentionLayout, OneWarpReplaysScoresAndValues) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> small(-3, 3);
  std::vector<float> Q(size_t(kGroup) * kHeadDim), K(static_cast<size_t>(kTileElems)), V(K.size()),
      P(size_t(kGroup) * kTileKeys);
  for (auto* v : {&Q, &K, &V, &P})
    for (float& x : *v) x = float(small(rng));
  std::vector<float> sk(K.size(), -999.f), sv(V.size(), -999.f);
  for (int j = 0; j < kStagePasses; ++j)
    for (int l = 0; l < 32; ++l) {
      const int r = stage_row(l, j), ch = stage_chunk(l);
      for (int e = 0; e < 8; ++e) {
        sk[size_t(k_swizzled(r, ch) + e)] = K[size_t(r * kHeadDim + 8 * ch + e)];
        sv[size_t(v_swizzled(r, ch) + e)] = V[size_t(r * kHeadDim + 8 * ch + e)];
      }
    }
  // 8 elements (one uint4) of a tile at an element offset.
  auto piece = [](const std::vector<float>& tile, int offset) {
    std::array<float, 8> p{};
    for (int e = 0; e < 8; ++e) p[size_t(e)] = tile[size_t(offset + e)];
    return p;
  };
  auto regs = [](float a0, float a1, float a2, float a3) {
    return Regs4{Reg{a0, a1}, Reg{0.f, 0.f}, Reg{a2, a3}, Reg{0.f, 0.f}};  // rows 8-15 of A are zero
  };

  // S = Q·Kᵀ: k step 2pp takes Q dims 32pp+8c+{0,1} (a0) and +{2,3} (a2), K piece words x, y;
  // k step 2pp+1 dims +{4,5}, +{6,7} and words z, w.
  for (int t = 0; t < 2; ++t) {
    Acc s{};
    for (int pp = 0; pp < 4; ++pp)
      for (int half = 0; half < 2; ++half) {
        std::array<Regs4, 32> a{};
        std::array<Reg, 32> b0{}, b1{};
        for (int l = 0; l < 32; ++l) {
          const int g = l >> 2, c = l & 3;
          const float* qd = &Q[size_t(g * kHeadDim + 32 * pp + 8 * c + 4 * half)];
          a[size_t(l)] = regs(qd[0], qd[1], qd[2], qd[3]);
          const auto kp = piece(sk, k_swizzled(k_frag_row(l, t), k_frag_chunk(l, pp)));
          b0[size_t(l)] = {kp[size_t(4 * half)], kp[size_t(4 * half + 1)]};
          b1[size_t(l)] = {kp[size_t(4 * half + 2)], kp[size_t(4 * half + 3)]};
        }
        mma(s, a, b0, b1);
      }
    for (int l = 0; l < 32; ++l) {
      const int g = l >> 2, c = l & 3;
      for (int i = 0; i < 2; ++i) {  // s[t][i]: head g, key 8t + 2c + i
        const int key = 8 * t + 2 * c + i;
        float want = 0;
        for (int d = 0; d < kHeadDim; ++d) want += Q[size_t(g * kHeadDim + d)] * K[size_t(key * kHeadDim + d)];
        EXPECT_EQ(s[size_t(l)][size_t(i)], want) << "S head " << g << " key " << key;
        EXPECT_EQ(s[size_t(l)][size_t(i + 2)], 0.f) << "S row 8+" << g << " must stay zero";
      }
    }
  }

  // O += P·V: A = P[g][keys 2c, 2c+1] and [8+2c, 9+2c]; n tile j (h = j/8, e = j%8) pairs element
  // e of V pieces (0, h), (1, h) into b0 and of (2, h), (3, h) into b1 (the kernel's byte permutes).
  for (int j = 0; j < 16; ++j) {
    const int h = j >> 3, e = j & 7;
    Acc o{};
    std::array<Regs4, 32> a{};
    std::array<Reg, 32> b0{}, b1{};
    for (int l = 0; l < 32; ++l) {
      const int g = l >> 2, c = l & 3;
      const float* pg = &P[size_t(g * kTileKeys)];
      a[size_t(l)] = regs(pg[2 * c], pg[2 * c + 1], pg[8 + 2 * c], pg[9 + 2 * c]);
      std::array<std::array<float, 8>, 4> vp{};
      for (int r = 0; r < 4; ++r) vp[size_t(r)] = piece(sv, v_swizzled(v_frag_row(l, r), v_frag_chunk(l, h)));
      b0[size_t(l)] = {vp[0][size_t(e)], vp[1][size_t(e)]};
      b1[size_t(l)] = {vp[2][size_t(e)], vp[3][size_t(e)]};
    }
    mma(o, a, b0, b1);
    for (int l = 0; l < 32; ++l) {
      const int g = l >> 2, c = l & 3;
      for (int i = 0; i < 2; ++i) {  // o[j][i]: head g, dim 64h + 8(2c + i) + e (write_split_record)
        const int dim = 64 * h + 8 * (2 * c + i) + e;
        float want = 0;
        for (int k = 0; k < kTileKeys; ++k) want += P[size_t(g * kTileKeys + k)] * V[size_t(k * kHeadDim + dim)];
        EXPECT_EQ(o[size_t(l)][size_t(i)], want) << "O head " << g << " dim " << dim << " (n tile " << j << ")";
      }
    }
  }
}

TEST(DecodeAttentionLayout, TileBlocksMatchDivisionForEveryValidRow) {
  for (int B : {16, 17, 24, 40, 64, 1000})
    for (int base = 0; base < 300; base += 7)
      for (int kend : {base + 1, base + 5, base + 16, base + 17, base + 100}) {
        const TileBlocks tb = tile_blocks(base, B, kend);
        bool any_second = false;
        for (int r = 0; r < kTileKeys && base + r < kend; ++r) {
          const int key = base + r;
          const bool second = row_in_second(tb, r, B);
          any_second |= second;
          EXPECT_EQ(tb.first_block + (second ? 1 : 0), key / B) << "B " << B << " key " << key;
          EXPECT_EQ(row_slot(tb, r, B), key % B) << "B " << B << " key " << key;
        }
        EXPECT_EQ(tb.second_needed, any_second) << "B " << B << " base " << base << " kend " << kend;
        // The second table entry is read only when it exists (a key below kend is in that block).
        if (tb.second_needed) EXPECT_LE((tb.first_block + 1) * B, kend - 1);
      }
}

TEST(DecodeAttentionLayout, WarpTilesAreTheRegisterKernelsTiles) {
  for (int kbeg : {0, 5, 64, 1000})
    for (int len : {0, 1, 15, 16, 17, 63, 64, 65, 130, 1024, 1500})
      for (int warp = 0; warp < kWarps; ++warp) {
        int n = 0;
        for (int base = kbeg + warp * 16; base < kbeg + len; base += kWarps * 16) ++n;
        EXPECT_EQ(warp_tiles(kbeg, kbeg + len, warp), n) << "kbeg " << kbeg << " len " << len << " warp " << warp;
      }
}

// A captured graph's key bucket (1024) on a sliding layer plans for W = 513 keys.
TEST(DecodeAttentionLayout, SlidingPlanUsesTheWindowNotTheKeyBucket) {
  EXPECT_EQ(plan_keys(1024, 513), 513);
  EXPECT_EQ(plan_keys(300, 513), 300);
  EXPECT_EQ(plan_keys(1024, 0), 1024);
}

// Each split takes whole 16-key tiles of its query's own keys: together exactly [0, n), in order,
// tile counts within one of each other, whatever the number of splits the host planned for.
TEST(DecodeAttentionLayout, SplitKeyRangesCoverEachQuerysKeysOnceInEvenTiles) {
  for (int n : {1, 2, 15, 16, 17, 63, 64, 65, 100, 513, 1000, 8193, 100000, 131072})
    for (int splits : {1, 2, 3, 5, 8, 9, 33, 66, 100, 1000}) {
      SCOPED_TRACE("n " + std::to_string(n) + " splits " + std::to_string(splits));
      int next = 0, min_tiles = 1 << 30, max_tiles = 0;
      for (int s = 0; s < splits; ++s) {
        const KeyRange r = split_key_range(n, s, splits);
        ASSERT_EQ(r.begin, next);
        ASSERT_LE(r.begin, r.end);
        EXPECT_EQ(r.begin % kTileKeys, 0);
        if (r.end < n) EXPECT_EQ(r.end % kTileKeys, 0);
        const int tiles = (r.end - r.begin + kTileKeys - 1) / kTileKeys;
        min_tiles = std::min(min_tiles, tiles);
        max_tiles = std::max(max_tiles, tiles);
        next = r.end;
      }
      EXPECT_EQ(next, n);
      EXPECT_LE(max_tiles - min_tiles, 1);
    }
}

TEST(DecodeAttentionLayout, SplitCountAimsAtOneWaveWithinScratch) {
  for (int keys : {0, 1, 63, 64, 65, 513, 1024, 8192, 16384, 100000, 131072})
    for (int64_t heads : {4, 8, 32, 200})
      for (int64_t target : {1, 8, 264, 396, 1024})
        for (int64_t max_partials : {heads, heads * 2, int64_t(4096), int64_t(8192)}) {
          SCOPED_TRACE("keys " + std::to_string(keys) + " heads " + std::to_string(heads) + " target " +
                       std::to_string(target) + " max " + std::to_string(max_partials));
          const int s = plan_decode_split_count(keys, heads, target, max_partials);
          EXPECT_GE(s, 1);
          EXPECT_LE(heads * s, max_partials);
          EXPECT_LE(int64_t(s - 1) * kStepKeys, std::max(keys, 1) - 1);  // every split can have a 64-key step
          if (s > 1) EXPECT_LE(heads * s, target);
        }
  // Flint on 132 SMs (target 264: 2 CTAs per SM of the pipelined kernel), 4 KV heads, 4096 records.
  EXPECT_EQ(plan_decode_split_count(16384, 8 * 4, 264, 4096), 8);   // 8 sequences at 8K, graph bucket
  EXPECT_EQ(plan_decode_split_count(16384, 2 * 4, 264, 4096), 33);  // 2 sequences
  EXPECT_EQ(plan_decode_split_count(16384, 4, 264, 4096), 66);      // 1 sequence at 8K
  EXPECT_EQ(plan_decode_split_count(131072, 4, 264, 4096), 66);     // 1 sequence at 100K
  EXPECT_EQ(plan_decode_split_count(plan_keys(1024, 513), 4, 264, 4096), 9);      // sliding, 1 sequence
  EXPECT_EQ(plan_decode_split_count(plan_keys(1024, 513), 8 * 4, 264, 4096), 8);  // sliding, 8 sequences
  // 8 sequences at 8,193 keys in 8 splits: 64 or 65 tiles each (the old plan's 2,048-key chunks
  // left 4 of the 8 splits empty).
  EXPECT_EQ(split_key_range(8193, 0, 8).end, 64 * kTileKeys);
  EXPECT_EQ(split_key_range(8193, 7, 8).begin, 448 * kTileKeys);
  EXPECT_EQ(split_key_range(8193, 7, 8).end, 8193);
}

}  // namespace
}  // namespace striker::cuda::decode
