// Hopper grouped expert GEMMs (moe_grouped_wgmma.h) against the CPU references of the grouped
// path (moe_grouped_ref.cpp, FLINT.md §4 rounding points): experts with row counts that are not
// multiples of the 128-row tile, with 0 rows, with several tiles; reduction and output widths off
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

// K = 1 routing in which expert e gets exactly counts[e] tokens, in shuffled token order.
std::vector<int32_t> routing_with_counts(std::mt19937& rng, const std::vector<int>& counts) {
  std::vector<int32_t> ids;
  for (size_t e = 0; e < counts.size(); ++e) ids.insert(ids.end(), size_t(counts[e]), int32_t(e));
  std::shuffle(ids.begin(), ids.end(), rng);
  return ids;
}

// BF16 weights of E experts, on the host and the device.
struct Bf16Experts {
  std::vector<bf16> g, u, d;
  DeviceBuffer<bf16> dg, du, dd;
  Bf16Experts(std::mt19937& rng, int E, int H, int I, float scale)
      : g(random_bf16(rng, size_t(E) * I * H, scale)), u(random_bf16(rng, g.size(), scale)),
        d(random_bf16(rng, size_t(E) * H * I, scale)), dg(g), du(u), dd(d) {}
};

// Runs sort + gate/up + down (+ combine) on the wgmma path and checks each kernel against its
// reference: gate/up vs moe_grouped_gate_up_ref, down vs moe_grouped_down_ref on the device's own
// act rows, h vs the per-token moe_ref when `per_token`.
void check_bf16(std::mt19937& rng, const Bf16Experts& w, const std::vector<int32_t>& ids, int T, int K, int E, int H,
                int I, bool per_token, const std::string& where) {
  const auto tw = random_f32(rng, ids.size(), 0.4f, 0.2f);
  const auto x = random_bf16(rng, size_t(T) * H);
  const auto h0 = random_bf16(rng, size_t(T) * H);
  std::vector<int32_t> sorted, row;
  std::vector<MoeTile> tiles;
  moe_route_sort_ref(ids, T, K, E, kTm, sorted, row, tiles);
  std::vector<bf16> act_ref;
  moe_grouped_gate_up_ref(x, K, H, w.g, w.u, I, sorted, tiles, act_ref);
  DeviceRouting d(ids, T, K, E, kTm);
  DeviceBuffer<bf16> d_x(x), d_h(h0), d_act(size_t(T) * K * I), d_y(size_t(T) * K * H);
  DeviceBuffer<float> d_tw(tw);
  d_act.poison();
  d_y.poison();
  moe_route_sort(d.ids.get(), T, K, d.r, nullptr);
  moe_grouped_gate_up_wgmma(d_x.get(), T, K, H, w.dg.get(), w.du.get(), I, nullptr, nullptr, d.r, d_act.get(),
                            nullptr);
  moe_grouped_down_wgmma(d_act.get(), T, K, I, w.dd.get(), H, nullptr, d.r, d_y.get(), nullptr);
  moe_combine_sorted(d_y.get(), d.row.get(), d_tw.get(), nullptr, T, K, H, d_h.get(), nullptr);
  STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
  ASSERT_EQ(d.num.download()[0], int32_t(tiles.size())) << where << "tile count";
  const auto act = d_act.download();
  const auto ca = compare(act, act_ref, 2 * kBf16Rtol, kBf16Atol);
  EXPECT_TRUE(ca.ok()) << where << "gate/up+SwiGLU " << ca.describe();
  std::vector<bf16> y_ref;
  moe_grouped_down_ref(act, I, w.d, H, tiles, y_ref);
  const auto cy = compare(d_y.download(), y_ref, kBf16Rtol, kBf16Atol);
  EXPECT_TRUE(cy.ok()) << where << "down " << cy.describe();
  if (per_token) {
    std::vector<bf16> h_ref = h0;
    moe_ref(x, T, H, I, 0, MoeRefWeights{&w.g, &w.u, &w.d, nullptr, nullptr, nullptr}, ids, tw, K, h_ref);
    const auto ch = compare(d_h.download(), h_ref, 2 * kBf16Rtol, kBf16Atol);
    EXPECT_TRUE(ch.ok()) << where << "h after combine vs moe_ref " << ch.describe();
  }
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
  const auto x = random_bf16(rng, size_t(T) * H);
  const auto h0 = random_bf16(rng, size_t(T) * H);
  const auto tw = random_f32(rng, size_t(T) * K, 0.4f, 0.2f);
  const auto ids_a = make_routing(rng, RoutingKind::uniform, T, K, E);
  const auto ids_b = make_routing(rng, RoutingKind::skewed, T, K, E);
  DeviceBuffer<bf16> d_x(x), d_h(h0), d_act(size_t(T) * K * I), d_y(size_t(T) * K * H);
  DeviceBuffer<float> d_tw(tw);
  DeviceRouting d(ids_a, T, K, E, kTm);
  cudaStream_t stream = nullptr;
  STRIKER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  STRIKER_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  moe_route_sort(d.ids.get(), T, K, d.r, stream);
  moe_grouped_gate_up_wgmma(d_x.get(), T, K, H, w.dg.get(), w.du.get(), I, nullptr, nullptr, d.r, d_act.get(), stream);
  moe_grouped_down_wgmma(d_act.get(), T, K, I, w.dd.get(), H, nullptr, d.r, d_y.get(), stream);
  moe_combine_sorted(d_y.get(), d.row.get(), d_tw.get(), nullptr, T, K, H, d_h.get(), stream);
  STRIKER_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  STRIKER_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (const auto* ids : {&ids_a, &ids_b}) {
    d.ids.upload(*ids);
    d_h.upload(h0);
    d_act.poison();
    d_y.poison();
    STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
    STRIKER_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    STRIKER_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<bf16> h_ref = h0;
    moe_ref(x, T, H, I, 0, MoeRefWeights{&w.g, &w.u, &w.d, nullptr, nullptr, nullptr}, *ids, tw, K, h_ref);
    const auto c = compare(d_h.download(), h_ref, 2 * kBf16Rtol, kBf16Atol);
    EXPECT_TRUE(c.ok()) << "graph replay, routing " << (ids == &ids_a ? "a (captured)" : "b (new)") << ": "
                        << c.describe();
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
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
