// Device-side grouped MoE (moe_grouped.h) and the per-slot decode kernels (moe.h) against their CPU references: the routing sort must match exactly; the grouped
// GEMMs within bf16 rounding, on routings with idle experts, one expert holding every row, token
// counts that are not multiples of the tile, every tile height,
// widths that are not multiples of the 64-wide tiles, NaN-poisoned outputs; and one captured
// CUDA graph replayed on a different routing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cuda/linear/gemv.h"
#include "backends/cuda/moe/moe.h"
#include "backends/cuda/moe/moe_grouped.h"
#include "cuda_test_util.h"
#include "moe_grouped_test_util.h"
#include "moe_routing_util.h"

namespace striker::cuda::testing {
namespace {

// "" when equal, else the first differing index with both values.
std::string first_difference(const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    if (got[i] != want[i])
      return "index " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", reference " + std::to_string(want[i]);
  return got.size() == want.size() ? "" : "sizes differ";
}

// The 16/64-row mma.sync GEMMs on BF16 stacks.
GroupedGemms mma_gemms(const Bf16Experts& w) {
  return [&w](DeviceMoeStep& s, const MoeRouting& r, cudaStream_t stream) {
    moe_grouped_gate_up(s.x.get(), s.T, s.K, s.H, w.dg.get(), w.du.get(), s.I, r, s.act.get(), stream);
    moe_grouped_down(s.act.get(), s.T, s.K, s.I, w.dd.get(), s.H, r, s.y.get(), stream);
  };
}

std::string describe_tile(const MoeTile& t) {
  return "{expert " + std::to_string(t.expert) + ", first " + std::to_string(t.first) + ", rows " +
         std::to_string(t.rows) + "}";
}

// The sort's four outputs (tile count, sorted_slot, slot_row, tiles) against the reference's.
void expect_sort_matches(DeviceRouting& d, const std::vector<int32_t>& sorted, const std::vector<int32_t>& row,
                         const std::vector<MoeTile>& tiles, const std::string& where) {
  ASSERT_EQ(d.num.download()[0], int32_t(tiles.size())) << where << ": tile count differs";
  ASSERT_EQ(first_difference(d.sorted.download(), sorted), "") << where << ": sorted_slot";
  ASSERT_EQ(first_difference(d.row.download(), row), "") << where << ": slot_row";
  const auto got = d.tiles.download();
  for (size_t i = 0; i < tiles.size(); ++i)
    ASSERT_TRUE(got[i].expert == tiles[i].expert && got[i].first == tiles[i].first && got[i].rows == tiles[i].rows)
        << where << ": tile " << i << " is " << describe_tile(got[i]) << ", reference " << describe_tile(tiles[i]);
}

TEST(CudaMoeGrouped, RouteSortMatchesReferenceExactly) {
  std::mt19937 rng(101);
  const int K = 6;
  for (int E : {16, 256})
    for (int T : {1, 2, 8, 9, 16, 64, 300, 2100, 8192})
      for (RoutingKind kind : {RoutingKind::uniform, RoutingKind::skewed, RoutingKind::identical})
        for (int tm : {16, 64, 128}) {  // 128: the wgmma paths
          const std::string where = "E=" + std::to_string(E) + " T=" + std::to_string(T) + " " + routing_name(kind) +
                                    " tile_rows=" + std::to_string(tm);
          const auto ids = make_routing(rng, kind, T, K, E);
          std::vector<int32_t> sorted, row;
          std::vector<MoeTile> tiles;
          moe_route_sort_ref(ids, T, K, E, tm, sorted, row, tiles);
          DeviceRouting d(ids, T, K, E, tm);
          moe_route_sort(d.ids.get(), T, K, d.r, nullptr);
          STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
          ASSERT_NO_FATAL_FAILURE(expect_sort_matches(d, sorted, row, tiles, where));
        }
}

// The fused sort (one launch, every CTA counting the whole step) at the edges of its shapes: slot
// counts around its 1024-slot chunks and its 128-CTA cap (chunks of 2048 slots above), ids that
// are not 16-byte aligned (its vector loads fall back to one id per load), ids outside 0..E-1
// (negative and too large: sorted after every expert, no tile), E = 512 with K = 8, and steps of
// 9-64 tokens (batched decode). Every output against the reference, on poisoned buffers.
TEST(CudaMoeGrouped, RouteSortEdgesMatchReferenceExactly) {
  std::mt19937 rng(106);
  struct Case {
    int E, K, T;
    bool misaligned, out_of_range;
  };
  const Case cases[] = {{256, 6, 9, false, false},     {256, 6, 13, true, true},     {256, 6, 64, false, true},
                        {256, 6, 170, true, false},    {256, 6, 171, false, false},  {256, 6, 1365, true, false},
                        {256, 6, 1366, false, true},   {256, 6, 1024, true, true},   {512, 8, 1023, false, true},
                        {512, 8, 4097, true, false},   {256, 6, 21845, false, false}, {256, 6, 21846, true, true},
                        {7, 3, 43691, false, true},    {256, 1, 1, true, true}};
  for (const Case& c : cases)
    for (int tm : {16, 64, 128}) {
      const std::string where = "E=" + std::to_string(c.E) + " K=" + std::to_string(c.K) + " T=" +
                                std::to_string(c.T) + (c.misaligned ? " misaligned" : "") +
                                (c.out_of_range ? " out-of-range ids" : "") + " tile_rows=" + std::to_string(tm);
      auto ids = make_routing(rng, RoutingKind::uniform, c.T, c.K, c.E);
      if (c.out_of_range)
        for (size_t i = 0; i < ids.size(); i += 97) ids[i] = (i / 97) % 2 ? c.E + int32_t(i % 5) : -1 - int32_t(i % 3);
      std::vector<int32_t> sorted, row;
      std::vector<MoeTile> tiles;
      moe_route_sort_ref(ids, c.T, c.K, c.E, tm, sorted, row, tiles);
      DeviceRouting d(ids, c.T, c.K, c.E, tm);
      std::vector<int32_t> shifted(ids.size() + 1, 0);
      std::copy(ids.begin(), ids.end(), shifted.begin() + 1);
      DeviceBuffer<int32_t> d_shifted(shifted);  // ids at a 4-byte offset
      moe_route_sort(c.misaligned ? d_shifted.get() + 1 : d.ids.get(), c.T, c.K, d.r, nullptr);
      STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
      ASSERT_NO_FATAL_FAILURE(expect_sort_matches(d, sorted, row, tiles, where));
    }
}

// The shared expert as expert E of the grouped GEMMs (moe_route_sort's shared_rows = T, the kernels'
// `shared`): sorted rows T·K + t gather token t and their tiles take the shared matrices — which here
// sit in buffers of their own while slice E of the device stacks is NaN, so a kernel that read the
// stacks for expert E cannot pass; the references run the shared expert as slice E of the host
// stacks. The sort against its reference exactly (also with shared_rows 0 = the routed rows alone),
// act and y of every row, routed and shared, within bf16 rounding; poisoned outputs.
TEST(CudaMoeGrouped, SharedExpertAsExpertEMatchesReference) {
  std::mt19937 rng(107);
  const int E = 16, H = 264, I = 72, K = 6;
  const Bf16Experts w(rng, E + 1, H, I, 0.06f, 0.1f);  // expert E: the shared expert
  auto stack_without_e = [&](const std::vector<bf16>& m, size_t per) {
    std::vector<bf16> v(m.begin(), m.begin() + long(E * per));
    v.resize(size_t(E + 1) * per, float_to_bf16(std::nanf("")));
    return v;
  };
  auto slice_e = [&](const std::vector<bf16>& m, size_t per) {
    return std::vector<bf16>(m.begin() + long(E * per), m.begin() + long((E + 1) * per));
  };
  const size_t gate_per = size_t(I) * H, down_per = size_t(H) * I;
  DeviceBuffer<bf16> dg(stack_without_e(w.g, gate_per)), du(stack_without_e(w.u, gate_per)),
      dd(stack_without_e(w.d, down_per)), sg(slice_e(w.g, gate_per)), su(slice_e(w.u, gate_per)),
      sd(slice_e(w.d, down_per));
  const Bf16SharedExpert sh{sg.get(), su.get(), sd.get(), I};
  for (int T : {9, 16, 17, 64})
    for (RoutingKind kind : {RoutingKind::uniform, RoutingKind::skewed})
      for (int tm : {16, 64}) {
        const std::string where = "T=" + std::to_string(T) + " " + routing_name(kind) + " tile_rows=" + std::to_string(tm);
        const auto ids = make_routing(rng, kind, T, K, E);
        std::vector<int32_t> sorted, row;
        std::vector<MoeTile> tiles;
        moe_route_sort_ref(ids, T, K, E, tm, sorted, row, tiles, T);
        ASSERT_EQ(sorted.size(), size_t(T) * (K + 1));
        ASSERT_EQ(tiles.back().expert, E) << where;
        DeviceRouting d(ids, T, K, E, tm, T);
        moe_route_sort(d.ids.get(), T, K, d.r, nullptr, T);
        STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
        ASSERT_NO_FATAL_FAILURE(expect_sort_matches(d, sorted, row, tiles, where));
        const auto x = random_bf16(rng, size_t(T) * H);
        const size_t rows = size_t(T) * (K + 1);
        DeviceBuffer<bf16> d_x(x), act(rows * I), y(rows * H);
        act.poison();
        y.poison();
        moe_grouped_gate_up(d_x.get(), T, K, H, dg.get(), du.get(), I, d.r, act.get(), nullptr, &sh);
        moe_grouped_down(act.get(), T, K, I, dd.get(), H, d.r, y.get(), nullptr, &sh);
        STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
        std::vector<bf16> act_ref, y_ref;
        moe_grouped_gate_up_ref(x, K, H, w.g, w.u, I, sorted, tiles, act_ref);
        const auto act_got = act.download();
        const auto ca = compare(act_got, act_ref, 2 * kBf16Rtol, kBf16Atol);
        EXPECT_TRUE(ca.ok()) << where << ": gate/up+SwiGLU " << ca.describe();
        moe_grouped_down_ref(act_got, I, w.d, H, tiles, y_ref);
        const auto cy = compare(y.download(), y_ref, kBf16Rtol, kBf16Atol);
        EXPECT_TRUE(cy.ok()) << where << ": down " << cy.describe();
      }
  const Bf16SharedExpert wider{sg.get(), su.get(), sd.get(), I + 8};
  DeviceRouting d9(make_routing(rng, RoutingKind::uniform, 9, K, E), 9, K, E, 16, 9);
  EXPECT_THROW(moe_grouped_down(nullptr, 9, K, I, dd.get(), H, d9.r, nullptr, nullptr, &wider), Error)
      << "a shared expert of another width cannot be one more expert";
}

TEST(CudaMoeGrouped, GroupedGemmsAndCombineMatchReference) {
  std::mt19937 rng(102);
  const int E = 16, H = 264, I = 72, K = 6;  // H, I: not multiples of the 64-wide tiles
  const Bf16Experts w(rng, E, H, I, 0.06f, 0.1f);
  const GroupedGemms gemms = mma_gemms(w);
  for (int T : {2, 5, 8, 9, 16, 64, 300, 2100})
    for (RoutingKind kind : {RoutingKind::uniform, RoutingKind::skewed, RoutingKind::identical}) {
      const auto ids = make_routing(rng, kind, T, K, E);
      check_step(rng, w, gemms, ids, T, K, E, H, I, {16, 64}, true,
                 "T=" + std::to_string(T) + " " + routing_name(kind) + " ");
    }
}

TEST(CudaMoeGrouped, FullSizeShapesMatchPerTokenReference) {
  std::mt19937 rng(103);
  const int E = 64, H = 2048, I = 512, K = 6, T = 64;  // 64 experts keep the host reference quick
  const Bf16Experts w(rng, E, H, I, 0.03f);
  const auto ids = make_routing(rng, RoutingKind::uniform, T, K, E);
  check_step(rng, w, mma_gemms(w), ids, T, K, E, H, I, {16, 64}, true, "full size T=64 ");
}

// A prefill step of more tokens than one grid dimension holds (65,535; the combine strides its
// tokens over grid.y): the routing sort and the combine must cover every token. Narrow rows keep
// the host reference quick; y_sorted is random (the GEMMs are covered above).
// Decode steps of 1-8 tokens run the per-slot kernels (moe.h: every slot reads its expert's rows,
// the shared expert, of its own width 40 beside the experts' 72, rides in the same two launches):
// shared_act against the dense SwiGLU reference, h against moe_ref with the shared expert;
// outputs poisoned first; routings with every token on one expert and with repeated experts; and
// the same steps with the next layer's input norm (expect_next_norm_matches).
TEST(CudaMoe, DecodeStepsOfOneToEightTokensPerSlot) {
  std::mt19937 rng(104);
  const int E = 16, H = 264, I = 72, Is = 40, K = 6;
  auto wg = random_bf16(rng, size_t(E) * I * H, 0.06f), wu = random_bf16(rng, wg.size(), 0.06f);
  auto wd = random_bf16(rng, size_t(E) * H * I, 0.1f);
  auto sg = random_bf16(rng, size_t(Is) * H, 0.06f), su = random_bf16(rng, sg.size(), 0.06f);
  auto sd = random_bf16(rng, size_t(H) * Is, 0.1f);
  DeviceBuffer<bf16> d_wg(wg), d_wu(wu), d_wd(wd), d_sg(sg), d_su(su), d_sd(sd);
  for (int T : {1, 2, 3, 5, 8})
    for (RoutingKind kind : {RoutingKind::uniform, RoutingKind::skewed, RoutingKind::identical}) {
      const std::string where = "T=" + std::to_string(T) + " " + routing_name(kind) + ": ";
      const auto ids = make_routing(rng, kind, T, K, E);
      const auto tw = random_f32(rng, ids.size(), 0.4f, 0.2f);
      const auto x = random_bf16(rng, size_t(T) * H);
      const auto h0 = random_bf16(rng, size_t(T) * H);
      std::vector<bf16> sact_ref, h_ref = h0;
      gate_up_ref(x, T, H, sg, su, Is, sact_ref);
      moe_ref(x, T, H, I, Is, MoeRefWeights{&wg, &wu, &wd, &sg, &su, &sd}, ids, tw, K, h_ref);
      DeviceBuffer<int32_t> d_ids(ids);
      DeviceBuffer<bf16> d_x(x), d_h(h0), d_act(size_t(T) * K * I), d_sact(size_t(T) * Is);
      DeviceBuffer<bf16> d_y(size_t(T) * (K + 1) * H);  // each slot's down rows (T >= 2)
      DeviceBuffer<float> d_tw(tw);
      d_act.poison();
      d_sact.poison();
      d_y.poison();
      moe_gate_up(d_x.get(), T, H, d_wg.get(), d_wu.get(), I, d_ids.get(), K, d_act.get(), d_sg.get(), d_su.get(), Is,
                  d_sact.get(), nullptr);
      moe_down_combine(d_act.get(), T, K, d_wd.get(), I, H, d_ids.get(), d_tw.get(), d_sact.get(), d_sd.get(), Is,
                       d_h.get(), nullptr, d_y.get());
      const auto cs = compare(d_sact.download(), sact_ref, 2 * kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(cs.ok()) << where << "shared act " << cs.describe();
      const auto ch = compare(d_h.download(), h_ref, 2 * kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(ch.ok()) << where << "h vs moe_ref with the shared expert " << ch.describe();
      expect_next_norm_matches(rng, h0, d_h, T, H, [&](bf16* h, const RowNorm* next) {
        moe_down_combine(d_act.get(), T, K, d_wd.get(), I, H, d_ids.get(), d_tw.get(), d_sact.get(), d_sd.get(), Is, h,
                         nullptr, d_y.get(), next);
      }, where);
    }
}

TEST(CudaMoeGrouped, SortAndCombineCoverMoreTokensThanOneGridDimension) {
  std::mt19937 rng(105);
  const int E = 16, H = 64, K = 6, T = 70000;
  const auto ids = make_routing(rng, RoutingKind::uniform, T, K, E);
  const auto tw = random_f32(rng, ids.size(), 0.4f, 0.2f);
  const auto y = random_bf16(rng, size_t(T) * K * H);
  const auto y_shared = random_bf16(rng, size_t(T) * H);
  const auto h0 = random_bf16(rng, size_t(T) * H);
  std::vector<int32_t> sorted, row;
  std::vector<MoeTile> tiles;
  moe_route_sort_ref(ids, T, K, E, 64, sorted, row, tiles);
  std::vector<bf16> h_ref = h0;
  moe_combine_sorted_ref(y, row, tw, y_shared, T, K, H, h_ref);
  DeviceRouting d(ids, T, K, E, 64);
  DeviceBuffer<bf16> d_y(y), d_ysh(y_shared), d_h(h0);
  DeviceBuffer<float> d_tw(tw);
  moe_route_sort(d.ids.get(), T, K, d.r, nullptr);
  moe_combine_sorted(d_y.get(), d.row.get(), d_tw.get(), d_ysh.get(), T, K, H, d_h.get(), nullptr);
  STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
  ASSERT_EQ(first_difference(d.row.download(), row), "") << "slot_row at T=" << T;
  const auto c = compare(d_h.download(), h_ref, 2 * kBf16Rtol, kBf16Atol);
  EXPECT_TRUE(c.ok()) << "h after combine at T=" << T << ": " << c.describe();
}

// Launch shapes depend only on T: a graph captured with one routing computes another routing's
// result when replayed after the ids change.
TEST(CudaMoeGrouped, CapturedGraphReplaysOnANewRouting) {
  std::mt19937 rng(104);
  const int E = 16, H = 136, I = 48, K = 6, T = 37;
  const Bf16Experts w(rng, E, H, I, 0.08f, 0.1f);
  expect_graph_replays_new_routing(rng, w, mma_gemms(w), T, K, E, H, I, moe_tile_rows_for(int64_t(T) * K, E));
}

TEST(CudaMoeGrouped, RejectsUnsupportedShapes) {
  DeviceRouting d({0, 1}, 1, 2, 4, 16);
  DeviceBuffer<bf16> buf(1024);
  MoeRouting bad = d.r;
  bad.tile_rows = 32;
  EXPECT_THROW(moe_route_sort(d.ids.get(), 1, 2, bad, nullptr), Error);
  bad = d.r;
  bad.experts = kMoeMaxExperts + 1;
  EXPECT_THROW(moe_route_sort(d.ids.get(), 1, 2, bad, nullptr), Error);
  EXPECT_THROW(moe_grouped_gate_up(buf.get(), 1, 2, 12, buf.get(), buf.get(), 8, d.r, buf.get(), nullptr), Error);
  EXPECT_THROW(moe_grouped_down(buf.get(), 1, 2, 8, buf.get(), 20, d.r, buf.get(), nullptr), Error);
  bad = d.r;
  bad.tile_rows = 8;  // the deleted skinny decode form's tiles
  EXPECT_THROW(moe_route_sort(d.ids.get(), 1, 2, bad, nullptr), Error);
  bad.tile_rows = 256;  // the deleted tall tiles
  EXPECT_THROW(moe_route_sort(d.ids.get(), 1, 2, bad, nullptr), Error);
}

// Decode steps of 2-8 tokens at Flint's expert shape (H 2048, I and the shared expert's width 512):
// the down projection runs slot by slot into a scratch, then the combine (moe.h). Every token's act,
// shared_act and h must equal, bit for bit, the same token run alone (T = 1 takes the one-kernel
// down), and h must match moe_ref; outputs and the scratch NaN-poisoned first; routings uniform,
// skewed (experts shared between tokens) and identical (all tokens on 6 experts).
TEST(CudaMoe, DecodeStepsAtFlintSizeMatchOneTokenSteps) {
  std::mt19937 rng(106);
  const int E = 16, H = 2048, I = 512, Is = 512, K = 6;
  const auto wg = random_bf16(rng, size_t(E) * I * H, 0.03f), wu = random_bf16(rng, wg.size(), 0.03f);
  const auto wd = random_bf16(rng, size_t(E) * H * I, 0.03f);
  const auto sg = random_bf16(rng, size_t(Is) * H, 0.03f), su = random_bf16(rng, sg.size(), 0.03f);
  const auto sd = random_bf16(rng, size_t(H) * Is, 0.03f);
  DeviceBuffer<bf16> d_wg(wg), d_wu(wu), d_wd(wd), d_sg(sg), d_su(su), d_sd(sd);
  auto run = [&](int T, const std::vector<bf16>& x, const std::vector<int32_t>& ids, const std::vector<float>& tw,
                 const std::vector<bf16>& h0) {
    DeviceBuffer<int32_t> d_ids(ids);
    DeviceBuffer<bf16> d_x(x), d_h(h0), d_act(size_t(T) * K * I), d_sact(size_t(T) * Is);
    DeviceBuffer<bf16> d_y(size_t(T) * (K + 1) * H);
    DeviceBuffer<float> d_tw(tw);
    d_act.poison();
    d_sact.poison();
    d_y.poison();
    moe_gate_up(d_x.get(), T, H, d_wg.get(), d_wu.get(), I, d_ids.get(), K, d_act.get(), d_sg.get(), d_su.get(), Is,
                d_sact.get(), nullptr);
    moe_down_combine(d_act.get(), T, K, d_wd.get(), I, H, d_ids.get(), d_tw.get(), d_sact.get(), d_sd.get(), Is,
                     d_h.get(), nullptr, d_y.get());
    return DecodeMoeOut{d_act.download(), d_sact.download(), d_h.download()};
  };
  for (int T : {2, 3, 5, 8})
    for (RoutingKind kind : {RoutingKind::uniform, RoutingKind::skewed, RoutingKind::identical}) {
      const std::string where = "T=" + std::to_string(T) + " " + routing_name(kind) + ": ";
      const auto ids = make_routing(rng, kind, T, K, E);
      const auto tw = random_f32(rng, ids.size(), 0.4f, 0.2f);
      const auto x = random_bf16(rng, size_t(T) * H);
      const auto h0 = random_bf16(rng, size_t(T) * H);
      const DecodeMoeOut got = expect_step_matches_one_token_steps(run, T, H, K, x, ids, tw, h0, where);
      std::vector<bf16> h_ref = h0;
      moe_ref(x, T, H, I, Is, MoeRefWeights{&wg, &wu, &wd, &sg, &su, &sd}, ids, tw, K, h_ref);
      const auto ch = compare(got.h, h_ref, 2 * kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(ch.ok()) << where << "h vs moe_ref with the shared expert " << ch.describe();
    }
}

// One token at Flint's widths takes moe_down_one_round_kernel (K <= 6, inter = shared_inter = 512);
// DecodeStepsAtFlintSizeMatchOneTokenSteps covers it at K = 6 with the shared expert. Here K = 1, 4
// and 6, with and without the shared expert, against moe_ref, and K = 7 (moe_down_kernel) beside it;
// outputs poisoned, so a row left unwritten fails as NaN.
TEST(CudaMoe, OneTokenAtFlintWidthsMatchesReferenceForEveryTopK) {
  std::mt19937 rng(313);
  const int E = 12, H = 2048, I = 512, Is = 512;
  const auto wg = random_bf16(rng, size_t(E) * I * H, 0.03f), wu = random_bf16(rng, wg.size(), 0.03f);
  const auto wd = random_bf16(rng, size_t(E) * H * I, 0.03f);
  const auto sg = random_bf16(rng, size_t(Is) * H, 0.03f), su = random_bf16(rng, sg.size(), 0.03f);
  const auto sd = random_bf16(rng, size_t(H) * Is, 0.03f);
  DeviceBuffer<bf16> d_wg(wg), d_wu(wu), d_wd(wd), d_sg(sg), d_su(su), d_sd(sd);
  for (int K : {1, 4, 6, 7})
    for (bool shared : {true, false}) {
      const std::string where = "K=" + std::to_string(K) + (shared ? " with" : " without") + " the shared expert: ";
      const auto ids = make_routing(rng, RoutingKind::uniform, 1, K, E);
      const auto tw = random_f32(rng, ids.size(), 0.4f, 0.2f);
      const auto x = random_bf16(rng, size_t(H));
      const auto h0 = random_bf16(rng, size_t(H));
      DeviceBuffer<int32_t> d_ids(ids);
      DeviceBuffer<bf16> d_x(x), d_h(h0), d_act(size_t(K) * I), d_sact(static_cast<size_t>(Is));
      DeviceBuffer<float> d_tw(tw);
      d_act.poison();
      d_sact.poison();
      moe_gate_up(d_x.get(), 1, H, d_wg.get(), d_wu.get(), I, d_ids.get(), K, d_act.get(),
                  shared ? d_sg.get() : nullptr, shared ? d_su.get() : nullptr, Is, shared ? d_sact.get() : nullptr,
                  nullptr);
      moe_down_combine(d_act.get(), 1, K, d_wd.get(), I, H, d_ids.get(), d_tw.get(), shared ? d_sact.get() : nullptr,
                       shared ? d_sd.get() : nullptr, Is, d_h.get(), nullptr);
      std::vector<bf16> h_ref = h0;
      const MoeRefWeights w = shared ? MoeRefWeights{&wg, &wu, &wd, &sg, &su, &sd}
                                     : MoeRefWeights{&wg, &wu, &wd, nullptr, nullptr, nullptr};
      moe_ref(x, 1, H, I, shared ? Is : 0, w, ids, tw, K, h_ref);
      const auto c = compare(d_h.download(), h_ref, 2 * kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(c.ok()) << where << c.describe();
    }
}

}  // namespace
}  // namespace striker::cuda::testing
