// Host checks of the prefill attention's index arithmetic (attention_prefill_layout.h), without a
// GPU: one warp's S = Q·Kᵀ and O = P·V replayed through ldmatrix (plain and .trans) and
// mma.m16n8k16 as the PTX ISA defines them, staging coverage, bank conflicts, and the key
// ranges, masks, warp skips and split plans the kernel derives from positions.
#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <random>
#include <set>
#include <vector>

#include "backends/cuda/attention/attention.h"
#include "backends/cuda/attention/attention_prefill_layout.h"
#include "ptx_fragments.h"

namespace striker::cuda::prefill {
namespace {

using namespace ptx_host;  // Reg, Regs4, Acc, ldmatrix_x4, mma (ptx_fragments.h)

std::array<Reg, 32> reg_of(const std::array<Regs4, 32>& r, int q) {
  std::array<Reg, 32> out;
  for (int l = 0; l < 32; ++l) out[size_t(l)] = r[size_t(l)][size_t(q)];
  return out;
}

// Warp `warp`'s rows are (token 2·warp + half, head g); Q[token][head][dim] is the CTA's query
// block, K and V the key tile ([key][dim], stored swizzled like the kernel's shared memory).
TEST(PrefillAttentionLayout, OneWarpReplaysScoresAndValues) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-3, 3);  // exact in float sums
  std::vector<float> Q(size_t(kTokens) * kGroup * kHeadDim), K(size_t(kKeyTile) * kHeadDim), V(K.size()),
      sk(K.size()), sv(K.size());
  for (auto& v : Q) v = float(small(rng));
  for (auto& v : K) v = float(small(rng));
  for (auto& v : V) v = float(small(rng));
  for (int key = 0; key < kKeyTile; ++key)
    for (int dim = 0; dim < kHeadDim; ++dim) {
      sk[size_t(kv_swizzled(key, dim / 8) + dim % 8)] = K[size_t(key) * kHeadDim + dim];
      sv[size_t(kv_swizzled(key, dim / 8) + dim % 8)] = V[size_t(key) * kHeadDim + dim];
    }
  auto q_at = [&](int token, int head, int dim) { return Q[(size_t(token) * kGroup + size_t(head)) * kHeadDim + size_t(dim)]; };
  for (int warp = 0; warp < kWarps; ++warp) {
    // S = Q·Kᵀ as the kernel does it.
    Acc s[kKeyTile / 8] = {};
    for (int ks = 0; ks < kHeadDim / 16; ++ks) {
      std::array<Regs4, 32> qa{};
      for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 4; ++i) {
          const int token = row_token(warp, q_frag_half(i)), dim = q_frag_dim(lane, ks, i);
          qa[size_t(lane)][size_t(i)] = {q_at(token, row_head(lane), dim), q_at(token, row_head(lane), dim + 1)};
        }
      for (int np = 0; np < kKeyTile / 16; ++np) {
        const auto b = ldmatrix_x4(sk, [&](int l) { return kv_swizzled(k_ldm_key(l, np), k_ldm_chunk(l, ks)); }, false);
        mma(s[2 * np], qa, reg_of(b, 0), reg_of(b, 1));
        mma(s[2 * np + 1], qa, reg_of(b, 2), reg_of(b, 3));
      }
    }
    for (int j = 0; j < kKeyTile / 8; ++j)
      for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 4; ++i) {
          const int token = row_token(warp, acc_half(i)), head = row_head(lane), key = 8 * j + acc_col(lane, i);
          float want = 0;
          for (int dim = 0; dim < kHeadDim; ++dim) want += q_at(token, head, dim) * K[size_t(key) * kHeadDim + size_t(dim)];
          ASSERT_EQ(s[j][size_t(lane)][size_t(i)], want)
              << "S: warp " << warp << " key tile " << j << " lane " << lane << " element " << i;
        }
    // P = small integers placed in the S accumulators; O = P·V with the register reuse.
    std::vector<float> P(size_t(16) * kKeyTile);  // [warp row g + 8·half][key]
    for (int j = 0; j < kKeyTile / 8; ++j)
      for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 4; ++i) {
          const float p = float(small(rng));
          s[j][size_t(lane)][size_t(i)] = p;
          P[size_t(row_head(lane) + 8 * acc_half(i)) * kKeyTile + size_t(8 * j + acc_col(lane, i))] = p;
        }
    Acc o[kHeadDim / 8] = {};
    for (int kt = 0; kt < kKeyTile / 16; ++kt) {
      std::array<Regs4, 32> pa{};
      for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < 4; ++r)
          pa[size_t(lane)][size_t(r)] = {s[p_reg_tile(kt, r)][size_t(lane)][size_t(p_reg_elem(r))],
                                         s[p_reg_tile(kt, r)][size_t(lane)][size_t(p_reg_elem(r) + 1)]};
      for (int dp = 0; dp < kHeadDim / 16; ++dp) {
        const auto b = ldmatrix_x4(sv, [&](int l) { return kv_swizzled(v_ldm_key(l, kt), v_ldm_chunk(l, dp)); }, true);
        mma(o[2 * dp], pa, reg_of(b, 0), reg_of(b, 1));
        mma(o[2 * dp + 1], pa, reg_of(b, 2), reg_of(b, 3));
      }
    }
    for (int j = 0; j < kHeadDim / 8; ++j)
      for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 4; ++i) {
          const int row = row_head(lane) + 8 * acc_half(i), dim = 8 * j + acc_col(lane, i);
          float want = 0;
          for (int key = 0; key < kKeyTile; ++key)
            want += P[size_t(row) * kKeyTile + size_t(key)] * V[size_t(key) * kHeadDim + size_t(dim)];
          ASSERT_EQ(o[j][size_t(lane)][size_t(i)], want)
              << "O: warp " << warp << " dim tile " << j << " lane " << lane << " element " << i;
        }
  }
}

TEST(PrefillAttentionLayout, StagingCoversEachKeyChunkOnce) {
  std::vector<int> hits(size_t(kKeyTile) * kChunks, 0);
  for (int pass = 0; pass < kStagePasses; ++pass)
    for (int tid = 0; tid < kThreads; ++tid) {
      const int key = stage_key(tid, pass);
      ASSERT_LT(key, kKeyTile);
      ++hits[size_t(key) * kChunks + size_t(stage_chunk(tid))];
    }
  for (size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i], 1) << "key " << i / kChunks << " chunk " << i % kChunks;
}

// Each 8-lane phase of an ldmatrix reads eight 16-byte rows; they must sit in eight different
// 16-byte bank groups of a 128-byte line.
TEST(PrefillAttentionLayout, LdmatrixPhasesAreBankConflictFree) {
  for (int step = 0; step < 8; ++step)
    for (int tile16 = 0; tile16 < kKeyTile / 16; ++tile16)
      for (int phase = 0; phase < 4; ++phase) {
        std::set<int> k_groups, v_groups;
        for (int l = 8 * phase; l < 8 * phase + 8; ++l) {
          k_groups.insert((kv_swizzled(k_ldm_key(l, tile16), k_ldm_chunk(l, step)) / 8) % 8);
          v_groups.insert((kv_swizzled(v_ldm_key(l, tile16), v_ldm_chunk(l, step)) / 8) % 8);
        }
        EXPECT_EQ(k_groups.size(), 8u) << "K, k step " << step << ", keys " << 16 * tile16 << ", phase " << phase;
        EXPECT_EQ(v_groups.size(), 8u) << "V, dims " << 16 * step << ", keys " << 16 * tile16 << ", phase " << phase;
      }
}

// For random tiles, windows and split plans: walking each split's key tiles as the kernel does
// (warp skips included) shows each query exactly the keys lo(p)..p, each once.
TEST(PrefillAttentionLayout, SplitsTilesAndMasksCoverEachQueryRangeOnce) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 400; ++trial) {
    const int window = std::array<int, 4>{0, 513, 17, 1}[size_t(trial % 4)];
    const int p0 = std::uniform_int_distribution<int>(0, trial % 3 == 0 ? 40 : 3000)(rng);
    const int n = std::uniform_int_distribution<int>(1, kTokens)(rng);
    const int max_keys = window > 0 ? std::min(p0 + n, window) : p0 + n;  // the step's bound (this tile only)
    const SplitPlan sp = plan_key_splits(max_keys + kTokens - 1, 1, 1 + trial % 200, 1 + trial % 50);
    ASSERT_EQ(sp.chunk % kKeyTile, 0);
    ASSERT_GE(sp.splits * sp.chunk, int64_t(max_keys + kTokens - 1));
    ASSERT_LE(sp.splits, std::max(1, 1 + trial % 50));
    for (int t = 0; t < n; ++t) {
      const int p = p0 + t, warp = t / 2;
      const int pos0 = p0 + row_token(warp, 0), pos1 = p0 + row_token(warp, 1);
      std::vector<int> seen(size_t(p + 1), 0);
      for (int split = 0; split < sp.splits; ++split) {
        const KeyRange r = cta_key_range(p0, n, window, split, int(sp.chunk));
        for (int kb = r.begin; kb < r.end; kb += kKeyTile) {
          const bool needed = warp_tile_needed(kb, pos0, pos1, window);
          for (int key = kb; key < kb + kKeyTile; ++key)
            if (key_visible(key, p, window, r)) {
              ASSERT_TRUE(needed) << "warp skipped a visible key tile at " << kb << " (p " << p << ")";
              ASSERT_LE(key, p);
              ++seen[size_t(key)];
            }
        }
      }
      for (int key = 0; key <= p; ++key)
        ASSERT_EQ(seen[size_t(key)], key >= key_lo(p, window) ? 1 : 0)
            << "p0 " << p0 << " n " << n << " window " << window << " query " << t << " key " << key << " splits "
            << sp.splits << " chunk " << sp.chunk;
    }
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
