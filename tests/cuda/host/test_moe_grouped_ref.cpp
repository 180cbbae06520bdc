// Host-only checks of the grouped-MoE CPU references (the GPU tests compare the kernels with
// them, so they must be right on their own): the routing sort is a stable counting sort with a
// tile list that covers every row once, and sort + grouped gate/up + down + combine equals the
// per-token reference moe_ref exactly.
#include <gtest/gtest.h>

#include "backends/cuda/moe/moe.h"
#include "backends/cuda/moe/moe_grouped.h"
#include "cuda_test_util.h"
#include "moe_routing_util.h"

namespace striker::cuda::testing {
namespace {

TEST(MoeGroupedRef, SortIsStableByExpertAndTilesCoverEveryRowOnce) {
  std::mt19937 rng(7);
  const int K = 6;
  for (int E : {16, 256})
    for (int T : {1, 9, 16, 64, 300, 2100})
      for (RoutingKind kind : {RoutingKind::uniform, RoutingKind::skewed, RoutingKind::identical})
        for (int tm : {16, 64}) {
          SCOPED_TRACE("E=" + std::to_string(E) + " T=" + std::to_string(T) + " " + routing_name(kind) +
                       " tile_rows=" + std::to_string(tm));
          const auto ids = make_routing(rng, kind, T, K, E);
          std::vector<int32_t> sorted, row;
          std::vector<MoeTile> tiles;
          moe_route_sort_ref(ids, T, K, E, tm, sorted, row, tiles);
          const int S = T * K;
          ASSERT_EQ(sorted.size(), size_t(S));
          std::vector<int> rows_of(size_t(E), 0);
          for (int s = 0; s < S; ++s) {
            ASSERT_GE(row[size_t(s)], 0);
            ASSERT_EQ(sorted[size_t(row[size_t(s)])], s);  // inverse permutations
            ++rows_of[size_t(ids[size_t(s)])];
          }
          for (int r = 1; r < S; ++r) {
            const int e0 = ids[size_t(sorted[size_t(r - 1)])], e1 = ids[size_t(sorted[size_t(r)])];
            ASSERT_LE(e0, e1) << "row " << r;
            if (e0 == e1) ASSERT_LT(sorted[size_t(r - 1)], sorted[size_t(r)]) << "stable order, row " << r;
          }
          int next = 0, expected_tiles = 0;
          for (int e = 0; e < E; ++e) expected_tiles += (rows_of[size_t(e)] + tm - 1) / tm;
          EXPECT_EQ(int(tiles.size()), expected_tiles);
          EXPECT_LE(int64_t(tiles.size()), moe_max_tiles(S, E, tm));
          for (const MoeTile& t : tiles) {
            ASSERT_EQ(t.first, next);
            ASSERT_GE(t.rows, 1);
            ASSERT_LE(t.rows, tm);
            for (int r = t.first; r < t.first + t.rows; ++r) ASSERT_EQ(ids[size_t(sorted[size_t(r)])], t.expert);
            next += t.rows;
          }
          EXPECT_EQ(next, S);
        }
}

TEST(MoeGroupedRef, OutOfRangeIdsAreSortedLastWithoutTiles) {
  const std::vector<int32_t> ids = {2, 7, 0, -1, 2, 1};  // T=3, K=2, E=4: ids 7 and -1 are invalid
  std::vector<int32_t> sorted, row;
  std::vector<MoeTile> tiles;
  moe_route_sort_ref(ids, 3, 2, 4, 16, sorted, row, tiles);
  EXPECT_EQ(sorted, (std::vector<int32_t>{2, 5, 0, 4, 1, 3}));
  ASSERT_EQ(tiles.size(), 3u);
  EXPECT_EQ(tiles[2].expert, 2);
  EXPECT_EQ(tiles[2].first + tiles[2].rows, 4);  // rows 4 and 5 (the invalid ids) have no tile
}

TEST(MoeGroupedRef, TileHeightFollowsRowsPerExpert) {
  EXPECT_EQ(moe_tile_rows_for(256 * 6, 256), 16);    // decode batch of 256: 6 rows per expert
  EXPECT_EQ(moe_tile_rows_for(682 * 6, 256), 16);
  EXPECT_EQ(moe_tile_rows_for(8192 * 6, 256), 64);   // 8K prefill: 192 rows per expert
  EXPECT_EQ(moe_max_tiles(96, 256, 16), 6 + 96);     // at most one partial tile per active expert
}

TEST(MoeGroupedRef, SortGroupedGemmsAndCombineEqualPerTokenReference) {
  std::mt19937 rng(11);
  const int E = 16, H = 40, I = 24, K = 6;
  auto wg = random_bf16(rng, size_t(E) * I * H, 0.2f), wu = random_bf16(rng, wg.size(), 0.2f);
  auto wd = random_bf16(rng, size_t(E) * H * I, 0.2f);
  for (int T : {9, 37})
    for (RoutingKind kind : {RoutingKind::uniform, RoutingKind::skewed}) {
      SCOPED_TRACE("T=" + std::to_string(T) + " " + routing_name(kind));
      const auto ids = make_routing(rng, kind, T, K, E);
      const auto tw = random_f32(rng, ids.size(), 0.4f, 0.2f);
      const auto x = random_bf16(rng, size_t(T) * H);
      const auto h0 = random_bf16(rng, size_t(T) * H);
      std::vector<bf16> h_ref = h0, h = h0;
      moe_ref(x, T, H, I, 0, MoeRefWeights{&wg, &wu, &wd, nullptr, nullptr, nullptr}, ids, tw, K, h_ref);
      std::vector<int32_t> sorted, row;
      std::vector<MoeTile> tiles;
      moe_route_sort_ref(ids, T, K, E, 16, sorted, row, tiles);
      std::vector<bf16> act, y;
      moe_grouped_gate_up_ref(x, K, H, wg, wu, I, sorted, tiles, act);
      moe_grouped_down_ref(act, I, wd, H, tiles, y);
      moe_combine_sorted_ref(y, row, tw, {}, T, K, H, h);
      for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(h[i].bits, h_ref[i].bits) << "element " << i;
    }
}

// The shared expert sorted in as expert E (shared_rows = T): rows T·K + t gather token t (sorted_slot
// t·K), its tiles come after the routed ones and cover those rows once, within moe_max_tiles; and
// sort + grouped GEMMs over stacks whose slice E is the shared expert + the combine with y_shared =
// rows T·K.. equals the per-token reference with that shared expert, bit for bit.
TEST(MoeGroupedRef, SharedExpertAsExpertEEqualsPerTokenReference) {
  std::mt19937 rng(13);
  const int E = 16, H = 40, I = 24, K = 6;
  auto wg = random_bf16(rng, size_t(E + 1) * I * H, 0.2f), wu = random_bf16(rng, wg.size(), 0.2f);
  auto wd = random_bf16(rng, size_t(E + 1) * H * I, 0.2f);
  const std::vector<bf16> sg(wg.end() - long(I) * H, wg.end()), su(wu.end() - long(I) * H, wu.end()),
      sd(wd.end() - long(H) * I, wd.end());
  for (int T : {9, 16, 37})
    for (int tm : {16, 64}) {
      SCOPED_TRACE("T=" + std::to_string(T) + " tile_rows=" + std::to_string(tm));
      const auto ids = make_routing(rng, RoutingKind::uniform, T, K, E);
      const auto tw = random_f32(rng, ids.size(), 0.4f, 0.2f);
      const auto x = random_bf16(rng, size_t(T) * H);
      const auto h0 = random_bf16(rng, size_t(T) * H);
      std::vector<bf16> h_ref = h0, h = h0;
      moe_ref(x, T, H, I, I, MoeRefWeights{&wg, &wu, &wd, &sg, &su, &sd}, ids, tw, K, h_ref);
      std::vector<int32_t> sorted, row;
      std::vector<MoeTile> tiles;
      moe_route_sort_ref(ids, T, K, E, tm, sorted, row, tiles, T);
      const int S = T * K;
      ASSERT_EQ(sorted.size(), size_t(S + T));
      for (int t = 0; t < T; ++t) ASSERT_EQ(sorted[size_t(S + t)], t * K);
      EXPECT_LE(int64_t(tiles.size()), moe_max_tiles(S, E, tm, T));
      int next = S;
      for (const MoeTile& tile : tiles)
        if (tile.expert == E) {
          ASSERT_EQ(tile.first, next);
          next += tile.rows;
        } else {
          ASSERT_LT(tile.first + tile.rows, S + 1) << "a routed tile among the shared rows";
          ASSERT_LT(tile.expert, E);
        }
      EXPECT_EQ(next, S + T);
      std::vector<bf16> act, y;
      moe_grouped_gate_up_ref(x, K, H, wg, wu, I, sorted, tiles, act);
      moe_grouped_down_ref(act, I, wd, H, tiles, y);
      const std::vector<bf16> y_shared(y.begin() + long(S) * H, y.end());
      y.resize(size_t(S) * H);
      moe_combine_sorted_ref(y, row, tw, y_shared, T, K, H, h);
      for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(h[i].bits, h_ref[i].bits) << "element " << i;
    }
}

}  // namespace
}  // namespace striker::cuda::testing
