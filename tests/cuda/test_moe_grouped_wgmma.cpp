// Hopper grouped expert GEMMs (moe_grouped_wgmma.h) against the CPU references of the grouped
// path (moe_grouped_ref.cpp, FLINT.md §4 rounding points): experts with row counts that are not
// multiples of the 128-row tile, with 0 rows, with several tiles; odd token counts; reduction and
// output widths off
// the 64/128/256 grids; NaN-poisoned outputs (a row left unwritten fails the comparison); full
// size shapes; one captured graph replayed on a new routing (NVFP4 experts:
// test_moe_grouped_wgmma_nvfp4.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backends/cuda/moe/moe.h"
#include "backends/cuda/moe/moe_grouped.h"
#include "backends/cuda/moe/moe_grouped_wgmma.h"
#include "cuda_test_util.h"
#include "moe_grouped_test_util.h"
#include "moe_routing_util.h"

namespace striker::cuda::testing {
namespace {

constexpr int kTm = kMoeWgmmaTileRows;

// The 128-row wgmma GEMMs on BF16 stacks.
GroupedGemms wgmma_gemms(const Bf16Experts& w) {
  return [&w](DeviceMoeStep& s, const MoeRouting& r, cudaStream_t stream) {
    moe_grouped_gate_up_wgmma(s.x.get(), s.T, s.K, s.H, w.dg.get(), w.du.get(), s.I, nullptr, nullptr, r, s.act.get(),
                              stream);
    moe_grouped_down_wgmma(s.act.get(), s.T, s.K, s.I, w.dd.get(), s.H, nullptr, r, s.y.get(), stream);
  };
}

// Sort + gate/up + down (+ combine) on the wgmma path, each kernel against its reference
// (check_step: gate/up vs moe_grouped_gate_up_ref, down vs moe_grouped_down_ref on the device's
// own act rows, h vs the per-token moe_ref when `per_token`).
void check_bf16(std::mt19937& rng, const Bf16Experts& w, const std::vector<int32_t>& ids, int T, int K, int E, int H,
                int I, bool per_token, const std::string& where) {
  check_step(rng, w, wgmma_gemms(w), ids, T, K, E, H, I, {kTm}, per_token, where);
}

// Row counts around the tile: 0, 1, 63, 64, 65, 127, 128, 129, 300 (3 tiles, the last one with
// 44 rows: only the first consumer warpgroup has rows), 513. Widths off every grid: H = 264 (k
// tail of 8 in gate/up, a third 256-column block of 8 columns in down), I = 136 (k tail in down,
// a second 128-column block of 8 columns in gate/up).
TEST(CudaMoeGroupedWgmma, RowCountsAroundTheTileMatchReference) {
  std::mt19937 rng(301);
  const std::vector<int> counts = {128, 129, 0, 1, 300, 64, 65, 127, 0, 63, 513, 2};
  const int E = int(counts.size()), H = 264, I = 136, K = 1;
  const Bf16Experts w(rng, E, H, I, 0.06f);
  const auto ids = routing_with_counts(rng, counts);
  const int T = int(ids.size());
  check_bf16(rng, w, ids, T, K, E, H, I, true, "counts around 128: ");
}

// Row counts over several tiles: 0; 1, 128 (one tile); 129, 200, 255, 256 (two); 257, 383, 384
// (three); 385 (four, the last with 1 row), 640 (five). Odd T (3151), hidden 1032 (17 k slices in
// gate/up, the last of 8; five column blocks in down, the last of 8 columns), inter 264 (three
// column blocks in gate/up, the last of 8 columns; a k tail of 8 in down).
TEST(CudaMoeGroupedWgmma, RowCountsOverSeveralTilesMatchReference) {
  std::mt19937 rng(306);
  const std::vector<int> counts = {256, 0, 1, 128, 129, 200, 255, 257, 383, 384, 385, 640, 0, 3, 130};
  const int E = int(counts.size()), H = 1032, I = 264, K = 1;
  const Bf16Experts w(rng, E, H, I, 0.04f);
  const auto ids = routing_with_counts(rng, counts);
  const int T = int(ids.size());
  ASSERT_EQ(T % 2, 1);
  check_bf16(rng, w, ids, T, K, E, H, I, false, "counts over several tiles: ");
}

// Fresh random inputs at odd T with top-6 over 64 experts (~230 rows per expert at T = 2501: most
// experts a full and a partial tile; skewed: some experts get several tiles, others none),
// off-grid widths; outputs NaN-poisoned per run.
TEST(CudaMoeGroupedWgmma, OddTokenCountsMatchReference) {
  std::mt19937 rng(307);
  const int E = 64, H = 264, I = 136, K = 6;
  const Bf16Experts w(rng, E, H, I, 0.06f);
  for (int T : {3, 2501})
    for (RoutingKind kind : {RoutingKind::uniform, RoutingKind::skewed}) {
      const auto ids = make_routing(rng, kind, T, K, E);
      check_bf16(rng, w, ids, T, K, E, H, I, T < 100, "T=" + std::to_string(T) + " " + routing_name(kind) + ": ");
    }
}

TEST(CudaMoeGroupedWgmma, RandomRoutingsMatchReference) {
  std::mt19937 rng(302);
  const int E = 16, H = 264, I = 72, K = 6;
  const Bf16Experts w(rng, E, H, I, 0.06f);
  for (int T : {1, 9, 64, 300, 2100})
    for (RoutingKind kind : {RoutingKind::uniform, RoutingKind::skewed, RoutingKind::identical}) {
      const auto ids = make_routing(rng, kind, T, K, E);
      check_bf16(rng, w, ids, T, K, E, H, I, T <= 300,
                 "T=" + std::to_string(T) + " " + routing_name(kind) + ": ");
    }
}

// Flint's expert shape (hidden 2048, inter 512) on 32 experts: 32 k slices in gate/up (the ring
// wraps many times), four 128-column blocks in gate/up, eight 256-column blocks in down; the identical routing gives 6
// experts 400 rows each (4 tiles, the last with 16 rows).
TEST(CudaMoeGroupedWgmma, FullSizeShapesMatchReference) {
  std::mt19937 rng(303);
  const int E = 32, H = 2048, I = 512, K = 6;
  const Bf16Experts w(rng, E, H, I, 0.03f);
  check_bf16(rng, w, make_routing(rng, RoutingKind::uniform, 256, K, E), 256, K, E, H, I, true, "full size uniform: ");
  check_bf16(rng, w, make_routing(rng, RoutingKind::identical, 400, K, E), 400, K, E, H, I, false,
             "full size identical: ");
}

// The tensor maps travel by value in the kernel parameters: a captured graph replays them on a
// new routing of the same T.
TEST(CudaMoeGroupedWgmma, CapturedGraphReplaysOnANewRouting) {
  std::mt19937 rng(305);
  const int E = 16, H = 136, I = 48, K = 6, T = 200;
  const Bf16Experts w(rng, E, H, I, 0.08f);
  expect_graph_replays_new_routing(rng, w, wgmma_gemms(w), T, K, E, H, I, kTm);
}

TEST(CudaMoeGroupedWgmma, RejectsRoutingsOfAnotherTileHeightAndBadShapes) {
  DeviceRouting d({0, 1}, 1, 2, 4, 64);
  DeviceBuffer<bf16> buf(4096);
  EXPECT_THROW(moe_grouped_gate_up_wgmma(buf.get(), 1, 2, 64, buf.get(), buf.get(), 64, nullptr, nullptr, d.r,
                                         buf.get(), nullptr),
               Error);  // sorted with 64-row tiles
  MoeRouting r = d.r;
  r.tile_rows = kTm;
  EXPECT_THROW(moe_grouped_down_wgmma(buf.get(), 1, 2, 12, buf.get(), 64, nullptr, r, buf.get(), nullptr), Error);
  EXPECT_THROW(moe_grouped_down_wgmma(buf.get() + 1, 1, 2, 64, buf.get(), 64, nullptr, r, buf.get(), nullptr), Error);
}

}  // namespace
}  // namespace striker::cuda::testing
