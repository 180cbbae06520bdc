// The routing kernels of a batched step alone (`bench_cuda_kernels routing`), at Flint's shape (256
// experts, top-6) for T = 8192 (a prefill chunk), 1024 and 16 (a batched decode step): the top-K
// selection of steps above 8 tokens on fp32 logits (router_select_topk: the kernel after the
// router's GEMM), and the routing sort (moe_route_sort) at the tile heights its callers use. Each
// row checked against its CPU reference: the selection's ids exactly and weights within 1e-5 of the
// rule applied to the same logits; the sort's sorted_slot, slot_row and tiles exactly. Then the decode
// router's rows (T <= 8, bench_moe.cpp: bench_router_decode_rows).
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/moe/moe_grouped.h"
#include "backends/cuda/moe/router.h"
#include "bench_kernels.h"
#include "bench_util.h"
#include "moe_routing_util.h"

namespace striker::cuda::testing {
namespace {

// Logits as the router's GEMM gives them (x ~ N(0, 1) rows times N(0, 0.03) weights over 2048:
// spread ~1.4), the selection reads them from L2 as after the GEMM that wrote them.
void bench_select(std::mt19937& rng, int T) {
  const RouterShape rs{2048, 256, 6, true, 2.5f};
  const int E = rs.n_experts, K = rs.top_k;
  const auto logits = random_f32(rng, size_t(T) * E, 0.f, 1.4f);
  const auto bias = random_f32(rng, size_t(E), 0.f, 0.05f);
  DeviceBuffer<float> d_logits(logits), d_bias(bias), d_w(size_t(T) * K);
  DeviceBuffer<int32_t> d_ids(size_t(T) * K);
  d_w.poison();
  d_ids.poison();
  auto select = [&](int) {
    router_select_topk(d_logits.get(), T, rs, d_bias.get(), d_ids.get(), d_w.get(), bench_stream());
  };
  select(0);
  STRIKER_CUDA_CHECK(cudaStreamSynchronize(bench_stream()));
  std::vector<int32_t> rule_ids;
  std::vector<float> rule_w;
  router_select_ref(std::vector<double>(logits.begin(), logits.end()), T, rs, &bias, rule_ids, rule_w);
  Comparison c = compare(d_w.download(), rule_w, 1e-5, 1e-6);
  if (d_ids.download() != rule_ids) c.nan_count += 1;  // another selection than the rule's fails the row
  row("router select T=" + std::to_string(T) + " (E=256 K=6)", &c, time_us(select),
      double(T) * E * 4 + double(T) * K * 8);
}

void bench_sort(std::mt19937& rng, int T, int tile_rows) {
  const int E = 256, K = 6, S = T * K;
  const auto ids = make_routing(rng, RoutingKind::uniform, T, K, E);
  const RotatedRoutings rot(rng, ids, T, K, E);  // launch i sorts routing i % 8 (routing 0 is checked)
  DeviceBuffer<int32_t> d_sorted(static_cast<size_t>(S)), d_row(static_cast<size_t>(S)), d_num(1);
  DeviceBuffer<MoeTile> d_tiles(static_cast<size_t>(moe_max_tiles(S, E, tile_rows)));
  for (auto* b : {&d_sorted, &d_row, &d_num}) b->poison();
  d_tiles.poison();
  const MoeRouting r{d_sorted.get(), d_row.get(), d_tiles.get(), d_num.get(), E, tile_rows};
  auto sort = [&](int i) { moe_route_sort(rot.ids(i), T, K, r, bench_stream()); };
  sort(0);
  STRIKER_CUDA_CHECK(cudaStreamSynchronize(bench_stream()));
  std::vector<int32_t> sorted, slot_row;
  std::vector<MoeTile> tiles;
  moe_route_sort_ref(ids, T, K, E, tile_rows, sorted, slot_row, tiles);
  Comparison c;
  bool same = d_sorted.download() == sorted && d_row.download() == slot_row &&
              d_num.download()[0] == int32_t(tiles.size());
  const auto got = d_tiles.download();
  for (size_t i = 0; same && i < tiles.size(); ++i)
    same = got[i].expert == tiles[i].expert && got[i].first == tiles[i].first && got[i].rows == tiles[i].rows;
  if (!same) c.nan_count += 1;
  row("moe sort T=" + std::to_string(T) + " (tile " + std::to_string(tile_rows) + ")", &c, time_us(sort),
      double(S) * 4 * 3);
}

}  // namespace

void bench_routing_rows(std::mt19937& rng) {
  for (int T : {8192, 1024, 16}) bench_select(rng, T);
  for (int T : {8192, 1024}) {
    bench_sort(rng, T, 64);
    bench_sort(rng, T, 128);
  }
  bench_sort(rng, 16, 16);
  bench_router_decode_rows(rng);
}

}  // namespace striker::cuda::testing
