// Grouped MoE kernels with NVFP4 experts (moe_grouped.h; Nvfp4FragmentWeights / Nvfp4TileWeights):
//  - decoding is exact: with scale2 = 1 the NVFP4 kernels must reproduce, bit for bit, the BF16
//    grouped kernels run on the dequantised stacks (16-row tiles: in the fragments' k order) (every
//    UE4M3 scale byte but 0xFF, incl. 0x7F NaN -> 0, subnormals, bit 7 set);
//  - per-expert scale2 (powers of two and not) is applied before the rounding: against the
//    composed CPU references (nvfp4_ref.cpp dequantisation + moe_grouped_ref.cpp) and, after the
//    combine, against the per-token reference moe_float_ref;
// at T = 9..2100, idle experts, every row on a few experts, both tile heights, output widths that
// are not multiples of the 64-wide tiles, NaN-poisoned outputs; one captured graph replayed on a
// new routing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "backends/cuda/moe/moe.h"
#include "backends/cuda/moe/moe_grouped.h"
#include "backends/cuda/moe/moe_grouped_layout.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "backends/cuda/nvfp4/nvfp4_moe.h"
#include "cuda_test_util.h"
#include "moe_grouped_test_util.h"
#include "moe_routing_util.h"

namespace striker::cuda::testing {
namespace {

std::string bits_at(const std::vector<bf16>& got, const std::vector<bf16>& want, int64_t i) {
  return "index " + std::to_string(i) + ": NVFP4 " + std::to_string(bf16_to_float(got[size_t(i)])) + ", BF16 " +
         std::to_string(bf16_to_float(want[size_t(i)]));
}

// The 16/64-row mma.sync GEMMs on NVFP4 stacks.
GroupedGemms nvfp4_mma_gemms(const ScaledNvfp4Experts& w) {
  return [&w](DeviceMoeStep& s, const MoeRouting& r, cudaStream_t stream) {
    moe_grouped_gate_up_nvfp4(s.x.get(), s.T, s.K, s.H, w.ng.view(), w.nu.view(), s.I, r, s.act.get(), stream);
    moe_grouped_down_nvfp4(s.act.get(), s.T, s.K, s.I, w.nd.view(), s.H, r, s.y.get(), stream);
  };
}

// Every 64-wide block of a row's reduction reordered as the NVFP4 kernels' MMA steps use it:
// index 16·ks + slot takes the k nvfp4_pair_frag_k(ks, slot) (moe_grouped_layout.h).
std::vector<bf16> in_fragment_order(const std::vector<bf16>& m, int64_t rows, int cols) {
  std::vector<bf16> out(m.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int k0 = 0; k0 < cols; k0 += kBK)
      for (int ks = 0; ks < kBK / 16; ++ks)
        for (int slot = 0; slot < 16; ++slot)
          out[size_t(r * cols + k0 + 16 * ks + slot)] = m[size_t(r * cols + k0 + nvfp4_pair_frag_k(ks, slot))];
  return out;
}

// scale2 = 1: the NVFP4 kernels must multiply exactly the values nvfp4_dequantize_ref gives, in the
// BF16 kernels' MMAs: 64-row tiles decode into shared-memory bf16 tiles read as the BF16 ones are,
// so the BF16 kernels on the dequantised stacks must agree bit for bit; 16-row tiles decode into
// register fragments (weights times 2^-8, undone exactly with scale2) that feed MMA step ks, slot s the
// k nvfp4_pair_frag_k(ks, s), so the BF16 kernels
// get the stacks and activations with every 64-block reordered that way — the very same MMAs on
// the same operands, bit for bit only if the fragments sit where nvfp4_pair_frag_k says. The gate
// stack's scale bytes run through all 256 values. The reduction widths (3, 5, 9 and 11 k tiles of
// 64) put the register fetch-ahead (kFetchAhead) before, at and past its slots' wrap, with k tiles
// left over from the unrolled loop.
TEST(CudaMoeGroupedNvfp4, DecodedTilesMatchBf16KernelsBitForBit) {
  std::mt19937 rng(201);
  const int E = 16, K = 6;
  for (const auto [H, I] : {std::pair{320, 192}, std::pair{704, 576}}) {
    auto g = random_nvfp4(rng, int64_t(E) * I, H), u = random_nvfp4(rng, int64_t(E) * I, H);
    auto d = random_nvfp4(rng, int64_t(E) * H, I, 0x28, 0x38);
    // Every scale byte but 0xFF, in a layout that differs per row (an odd stride). 0xFF is left
    // out: model/nvfp4's ue4m3_value reads it as 480 while the device decode (nvfp4_decode.cuh)
    // masks bit 7 and reads 0x7F = 0 — a codec disagreement outside this kernel (see the report).
    for (size_t i = 0; i < g.scales.size(); ++i) {
      const uint8_t b = uint8_t((i * 131) & 0xFF);
      g.scales[i] = b == 0xFF ? 0x7F : b;
    }
    const std::vector<float> ones(static_cast<size_t>(E), 1.f);
    DeviceStack ng(g, ones), nu(u, ones), nd(d, ones);
    const auto dg = dequantized_bf16(g, int64_t(E) * I, H), du = dequantized_bf16(u, int64_t(E) * I, H),
               dd = dequantized_bf16(d, int64_t(E) * H, I);
    DeviceBuffer<bf16> bg(dg), bu(du), bd(dd);
    DeviceBuffer<bf16> bg_ordered(in_fragment_order(dg, int64_t(E) * I, H)),
        bu_ordered(in_fragment_order(du, int64_t(E) * I, H)), bd_ordered(in_fragment_order(dd, int64_t(E) * H, I));
    for (int T : {9, 64, 300})
      for (int tm : {16, 64}) {
        // The BF16 kernels' inputs in the fragments' k order where the NVFP4 kernel decodes into
        // fragments: every 16-row tile (gate/up four k tiles fetched ahead at T = 9, two at 64 and 300:
        // nvfp4_gate_up_many_ctas; down at 5 CTAs per SM at T = 9, on the resident-A kernel at 64, 300:
        // nvfp4_down_resident_a).
        const bool fragments = tm == 16;
        const std::string where = "H=" + std::to_string(H) + " I=" + std::to_string(I) + " T=" + std::to_string(T) +
                                  " tile_rows=" + std::to_string(tm) + ": ";
        const auto ids = make_routing(rng, RoutingKind::uniform, T, K, E);
        DeviceRouting r(ids, T, K, E, tm);
        // Small activations keep the huge-scale columns finite in bf16.
        const auto xh = random_bf16(rng, size_t(T) * H, 0.01f);
        DeviceBuffer<bf16> x(xh), x_bf(fragments ? in_fragment_order(xh, T, H) : xh);
        DeviceBuffer<bf16> act_nv(size_t(T) * K * I), act_bf(size_t(T) * K * I), y_nv(size_t(T) * K * H),
            y_bf(size_t(T) * K * H);
        for (auto* b : {&act_nv, &act_bf, &y_nv, &y_bf}) b->poison();
        moe_route_sort(r.ids.get(), T, K, r.r, nullptr);
        moe_grouped_gate_up_nvfp4(x.get(), T, K, H, ng.view(), nu.view(), I, r.r, act_nv.get(), nullptr);
        moe_grouped_gate_up(x_bf.get(), T, K, H, (fragments ? bg_ordered : bg).get(), (fragments ? bu_ordered : bu).get(),
                            I, r.r, act_bf.get(), nullptr);
        // Both down kernels read the BF16 gate/up's rows: the NVFP4 one as they are, the BF16 one in its order.
        const auto act_rows = act_bf.download();
        DeviceBuffer<bf16> act_bf_in(fragments ? in_fragment_order(act_rows, int64_t(T) * K, I) : act_rows);
        moe_grouped_down_nvfp4(act_bf.get(), T, K, I, nd.view(), H, r.r, y_nv.get(), nullptr);
        moe_grouped_down(act_bf_in.get(), T, K, I, (fragments ? bd_ordered : bd).get(), H, r.r, y_bf.get(),
                         nullptr);
        STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
        const auto a1 = act_nv.download(), a2 = act_bf.download(), y1 = y_nv.download(), y2 = y_bf.download();
        size_t nan = 0;
        for (const auto& v : {a2, y2})
          for (bf16 b : v) nan += std::isnan(bf16_to_float(b));
        ASSERT_EQ(nan, 0u) << where << "the BF16 kernels left unwritten (NaN) rows: the comparison would be void";
        const int64_t ia = first_bit_difference(a1, a2), iy = first_bit_difference(y1, y2);
        EXPECT_EQ(ia, -1) << where << "gate/up differs at " << (ia >= 0 ? bits_at(a1, a2, ia) : "");
        EXPECT_EQ(iy, -1) << where << "down differs at " << (iy >= 0 ? bits_at(y1, y2, iy) : "");
      }
  }
}

// Routed experts with per-expert scale2 against the CPU references, kernel by kernel and after
// the combine.
TEST(CudaMoeGroupedNvfp4, ScaledExpertsMatchReference) {
  std::mt19937 rng(202);
  const int E = 16, H = 320, I = 192, K = 6;
  const ScaledNvfp4Experts w(rng, E, H, I);
  const GroupedGemms gemms = nvfp4_mma_gemms(w);
  for (int T : {2, 5, 8, 9, 16, 64, 300, 2100})
    for (RoutingKind kind : {RoutingKind::uniform, RoutingKind::skewed, RoutingKind::identical}) {
      const auto ids = make_routing(rng, kind, T, K, E);
      const bool per_token = T <= 300 || kind == RoutingKind::uniform;  // the slow reference once at T = 2100
      check_step(rng, w, gemms, ids, T, K, E, H, I, {16, 64}, per_token,
                 "T=" + std::to_string(T) + " " + routing_name(kind) + " ");
    }
}

// Decode steps of 1-8 tokens through the per-slot kernels (nvfp4_moe.h) with an NVFP4 shared expert
// in the same launches (width 128 beside the experts' 192, its own three scale2): h against
// moe_float_ref with the shared expert; outputs poisoned first; and the same steps with the next
// layer's input norm (expect_next_norm_matches).
// The shared expert as expert E of the NVFP4 grouped GEMMs (as CudaMoeGrouped.SharedExpertAsExpertE
// for BF16): its codes, scales and scale2 in buffers of their own, slice E of the device stacks other
// random codes with scale2 NaN (a kernel that read the stacks for expert E cannot pass), the
// references reading the shared expert as slice E of the host stacks. Flint's widths (H = 2048,
// I = 512: the 16-row gate/up on register fragments, the down wide below 192 pairs and resident-A from),
// and both tile heights.
TEST(CudaMoeGroupedNvfp4, SharedExpertAsExpertEMatchesReference) {
  std::mt19937 rng(207);
  const int E = 16, H = 2048, I = 512, K = 6;
  const ScaledNvfp4Experts w(rng, E + 1, H, I);  // expert E: the shared expert
  // Rows [r0, r0 + rows) of a matrix of `in` weights per row.
  auto rows_of = [](const Nvfp4HostMatrix& m, int64_t r0, int64_t rows, int in) {
    return Nvfp4HostMatrix{{m.codes.begin() + r0 * in / 2, m.codes.begin() + (r0 + rows) * in / 2},
                           {m.scales.begin() + r0 * in / 16, m.scales.begin() + (r0 + rows) * in / 16}};
  };
  auto other_e = [&](const Nvfp4HostMatrix& m, int64_t per, int in) {  // slice E replaced by other codes
    Nvfp4HostMatrix v = m;
    const auto junk = random_nvfp4(rng, per, in);
    std::copy(junk.codes.begin(), junk.codes.end(), v.codes.begin() + int64_t(E) * per * in / 2);
    std::copy(junk.scales.begin(), junk.scales.end(), v.scales.begin() + int64_t(E) * per * in / 16);
    return v;
  };
  auto nan_e = [&](std::vector<float> s2) {
    s2[size_t(E)] = std::nanf("");
    return s2;
  };
  const DeviceStack ng(other_e(w.g, I, H), nan_e(w.s2g)), nu(other_e(w.u, I, H), nan_e(w.s2u)),
      nd(other_e(w.d, H, I), nan_e(w.s2d));
  const DeviceNvfp4Matrix sg(rows_of(w.g, int64_t(E) * I, I, H)), su(rows_of(w.u, int64_t(E) * I, I, H)),
      sd(rows_of(w.d, int64_t(E) * H, H, I));
  const Nvfp4Shared sh{sg.view(), su.view(), sd.view(), w.s2g[size_t(E)], w.s2u[size_t(E)], w.s2d[size_t(E)], I};
  for (int T : {9, 16, 33, 64})
    for (int tm : {16, 64}) {
      const std::string where = "T=" + std::to_string(T) + " tile_rows=" + std::to_string(tm);
      const auto ids = make_routing(rng, RoutingKind::uniform, T, K, E);
      std::vector<int32_t> sorted, row;
      std::vector<MoeTile> tiles;
      moe_route_sort_ref(ids, T, K, E, tm, sorted, row, tiles, T);
      DeviceRouting d(ids, T, K, E, tm, T);
      moe_route_sort(d.ids.get(), T, K, d.r, nullptr, T);
      const auto x = random_bf16(rng, size_t(T) * H);
      const size_t rows = size_t(T) * (K + 1);
      DeviceBuffer<bf16> d_x(x), act(rows * I), y(rows * H);
      act.poison();
      y.poison();
      moe_grouped_gate_up_nvfp4(d_x.get(), T, K, H, ng.view(), nu.view(), I, d.r, act.get(), nullptr, &sh);
      moe_grouped_down_nvfp4(act.get(), T, K, I, nd.view(), H, d.r, y.get(), nullptr, &sh);
      STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
      ASSERT_EQ(d.num.download()[0], int32_t(tiles.size())) << where << ": tile count";
      std::vector<bf16> act_ref, y_ref;
      moe_grouped_gate_up_nvfp4_ref(x, K, H, w.g, w.s2g, w.u, w.s2u, I, sorted, tiles, act_ref);
      const auto act_got = act.download();
      const auto ca = compare(act_got, act_ref, 2 * kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(ca.ok()) << where << ": gate/up+SwiGLU " << ca.describe();
      moe_grouped_down_nvfp4_ref(act_got, I, w.d, w.s2d, H, tiles, y_ref);
      const auto cy = compare(y.download(), y_ref, kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(cy.ok()) << where << ": down " << cy.describe();
    }
}

TEST(CudaMoeGroupedNvfp4, DecodeStepsOfOneToEightTokensPerSlot) {
  std::mt19937 rng(205);
  const int E = 16, H = 320, I = 192, Is = 128, K = 6;
  const ScaledNvfp4Experts w(rng, E, H, I);
  const auto sg = random_nvfp4(rng, Is, H), su = random_nvfp4(rng, Is, H), sd = random_nvfp4(rng, H, Is);
  const float ssg = 0.0071f, ssu = 0.0113f, ssd = 0.0052f;
  const auto fsg = scaled_floats(sg, Is, H, {ssg}, int64_t(Is) * H);
  const auto fsu = scaled_floats(su, Is, H, {ssu}, int64_t(Is) * H);
  const auto fsd = scaled_floats(sd, H, Is, {ssd}, int64_t(H) * Is);
  DeviceBuffer<uint8_t> sgc(sg.codes), sgs(sg.scales), suc(su.codes), sus(su.scales), sdc(sd.codes), sds(sd.scales);
  const Nvfp4Shared sh{{sgc.get(), sgs.get()}, {suc.get(), sus.get()}, {sdc.get(), sds.get()}, ssg, ssu, ssd, Is};
  for (int T : {1, 2, 3, 5, 8})
    for (RoutingKind kind : {RoutingKind::uniform, RoutingKind::skewed, RoutingKind::identical}) {
      const std::string where = "T=" + std::to_string(T) + " " + routing_name(kind) + ": ";
      const auto ids = make_routing(rng, kind, T, K, E);
      const auto tw = random_f32(rng, ids.size(), 0.4f, 0.2f);
      const auto x = random_bf16(rng, size_t(T) * H);
      const auto h0 = random_bf16(rng, size_t(T) * H);
      std::vector<bf16> h_ref = h0;
      moe_float_ref(x, T, H, I, Is, MoeFloatWeights{&w.fg, &w.fu, &w.fd, &fsg, &fsu, &fsd}, ids, tw, K, h_ref);
      DeviceBuffer<int32_t> d_ids(ids);
      DeviceBuffer<bf16> d_x(x), d_h(h0), d_act(size_t(T) * K * I), d_sact(size_t(T) * Is);
      DeviceBuffer<bf16> d_y(size_t(T) * (K + 1) * H);  // each slot's down rows (T >= 2)
      DeviceBuffer<float> d_tw(tw);
      d_act.poison();
      d_sact.poison();
      d_y.poison();
      nvfp4_moe_gate_up(d_x.get(), T, H, w.ng.view(), w.nu.view(), I, d_ids.get(), K, d_act.get(), &sh, d_sact.get(),
                        nullptr);
      nvfp4_moe_down_combine(d_act.get(), T, K, w.nd.view(), I, H, d_ids.get(), d_tw.get(), &sh, d_sact.get(), nullptr,
                             d_h.get(), nullptr, d_y.get());
      const auto ch = compare(d_h.download(), h_ref, 2 * kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(ch.ok()) << where << "h vs moe_float_ref with the shared expert " << ch.describe();
      expect_next_norm_matches(rng, h0, d_h, T, H, [&](bf16* h, const RowNorm* next) {
        nvfp4_moe_down_combine(d_act.get(), T, K, w.nd.view(), I, H, d_ids.get(), d_tw.get(), &sh, d_sact.get(),
                               nullptr, h, nullptr, d_y.get(), next);
      }, where);
    }
}

// Output widths that are not multiples of the 64-wide column tiles (the reduction widths stay
// multiples of 64, as NVFP4 requires): gate/up with inter = 200, down with hidden = 264.
TEST(CudaMoeGroupedNvfp4, OutputWidthsOffTheTileGrid) {
  std::mt19937 rng(203);
  const int E = 8, K = 4, T = 37;
  for (int tm : {16, 64}) {
    const auto ids = make_routing(rng, RoutingKind::uniform, T, K, E);
    std::vector<int32_t> sorted, row;
    std::vector<MoeTile> tiles;
    moe_route_sort_ref(ids, T, K, E, tm, sorted, row, tiles);
    DeviceRouting r(ids, T, K, E, tm);
    moe_route_sort(r.ids.get(), T, K, r.r, nullptr);
    {  // gate/up: hidden 192 -> inter 200
      const int H = 192, I = 200;
      const auto g = random_nvfp4(rng, int64_t(E) * I, H), u = random_nvfp4(rng, int64_t(E) * I, H);
      const auto s2g = mixed_scale2(E, 0.007f), s2u = mixed_scale2(E, 0.011f);
      DeviceStack ng(g, s2g), nu(u, s2u);
      const auto x = random_bf16(rng, size_t(T) * H);
      DeviceBuffer<bf16> d_x(x), d_act(size_t(T) * K * I);
      d_act.poison();
      moe_grouped_gate_up_nvfp4(d_x.get(), T, K, H, ng.view(), nu.view(), I, r.r, d_act.get(), nullptr);
      std::vector<bf16> ref;
      moe_grouped_gate_up_nvfp4_ref(x, K, H, g, s2g, u, s2u, I, sorted, tiles, ref);
      const auto c = compare(d_act.download(), ref, 2 * kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(c.ok()) << "tile_rows=" << tm << " gate/up inter=200: " << c.describe();
    }
    {  // down: inter 128 -> hidden 264
      const int I = 128, H = 264;
      const auto d = random_nvfp4(rng, int64_t(E) * H, I);
      const auto s2d = mixed_scale2(E, 0.005f);
      DeviceStack nd(d, s2d);
      const auto act = random_bf16(rng, size_t(T) * K * I, 0.5f);
      DeviceBuffer<bf16> d_act(act), d_y(size_t(T) * K * H);
      d_y.poison();
      moe_grouped_down_nvfp4(d_act.get(), T, K, I, nd.view(), H, r.r, d_y.get(), nullptr);
      std::vector<bf16> ref;
      moe_grouped_down_nvfp4_ref(act, I, d, s2d, H, tiles, ref);
      const auto c = compare(d_y.download(), ref, kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(c.ok()) << "tile_rows=" << tm << " down hidden=264: " << c.describe();
    }
  }
}

// The NVFP4 path captured once in a CUDA graph computes another routing's result when replayed
// (launch shapes depend only on T; scale2 is read on the device).
TEST(CudaMoeGroupedNvfp4, CapturedGraphReplaysOnANewRouting) {
  std::mt19937 rng(205);
  const int E = 16, H = 192, I = 128, K = 6, T = 37;
  const ScaledNvfp4Experts w(rng, E, H, I);
  expect_graph_replays_new_routing(rng, w, nvfp4_mma_gemms(w), T, K, E, H, I, moe_tile_rows_for(int64_t(T) * K, E));
}

TEST(CudaMoeGroupedNvfp4, RejectsReductionWidthsThatAreNotMultiplesOf64) {
  std::mt19937 rng(204);
  const int E = 4, K = 2, T = 9;
  const auto ids = make_routing(rng, RoutingKind::uniform, T, K, E);
  DeviceRouting r(ids, T, K, E, 16);
  const auto m = random_nvfp4(rng, int64_t(E) * 64, 96);
  DeviceStack s(m, std::vector<float>(size_t(E), 1.f));
  DeviceBuffer<bf16> buf(size_t(T) * K * 128);
  EXPECT_THROW(moe_grouped_gate_up_nvfp4(buf.get(), T, K, 96, s.view(), s.view(), 64, r.r, buf.get(), nullptr), Error);
  EXPECT_THROW(moe_grouped_down_nvfp4(buf.get(), T, K, 96, s.view(), 64, r.r, buf.get(), nullptr), Error);
  Nvfp4Stack no_scale = s.view();
  no_scale.scale2 = nullptr;
  EXPECT_THROW(moe_grouped_down_nvfp4(buf.get(), T, K, 64, no_scale, 64, r.r, buf.get(), nullptr), Error);
}

// Decode steps of 2-8 tokens at Flint's expert shape (H 2048, I and the shared expert's width 512):
// every token's act (and below kNvfp4MoeSharedSkinnyMinTokens its shared_act and h) must equal, bit
// for bit, the same token run alone, and h must match moe_float_ref; outputs NaN-poisoned first;
// routings uniform, skewed (experts shared between tokens) and identical (all tokens on 6 experts).
TEST(CudaMoeGroupedNvfp4, DecodeStepsAtFlintSizeMatchOneTokenSteps) {
  std::mt19937 rng(206);
  const int E = 16, H = 2048, I = 512, Is = 512, K = 6;
  const ScaledNvfp4Experts w(rng, E, H, I);
  const auto sg = random_nvfp4(rng, Is, H), su = random_nvfp4(rng, Is, H), sd = random_nvfp4(rng, H, Is);
  const float ssg = 0.0071f, ssu = 0.0113f, ssd = 0.0052f;
  const auto fsg = scaled_floats(sg, Is, H, {ssg}, int64_t(Is) * H);
  const auto fsu = scaled_floats(su, Is, H, {ssu}, int64_t(Is) * H);
  const auto fsd = scaled_floats(sd, H, Is, {ssd}, int64_t(H) * Is);
  DeviceBuffer<uint8_t> sgc(sg.codes), sgs(sg.scales), suc(su.codes), sus(su.scales), sdc(sd.codes), sds(sd.scales);
  const Nvfp4Shared sh{{sgc.get(), sgs.get()}, {suc.get(), sus.get()}, {sdc.get(), sds.get()}, ssg, ssu, ssd, Is};
  auto run = [&](int T, const std::vector<bf16>& x, const std::vector<int32_t>& ids, const std::vector<float>& tw,
                 const std::vector<bf16>& h0) {
    DeviceBuffer<int32_t> d_ids(ids);
    DeviceBuffer<bf16> d_x(x), d_h(h0), d_act(size_t(T) * K * I), d_sact(size_t(T) * Is);
    DeviceBuffer<bf16> d_y(size_t(T) * (K + 1) * H);
    DeviceBuffer<float> d_tw(tw);
    d_act.poison();
    d_sact.poison();
    d_y.poison();
    nvfp4_moe_gate_up(d_x.get(), T, H, w.ng.view(), w.nu.view(), I, d_ids.get(), K, d_act.get(), &sh, d_sact.get(),
                      nullptr);
    nvfp4_moe_down_combine(d_act.get(), T, K, w.nd.view(), I, H, d_ids.get(), d_tw.get(), &sh, d_sact.get(), nullptr,
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
      // From kNvfp4MoeSharedSkinnyMinTokens the shared expert has the dense skinny GEMMs' bits
      // (CudaNvfp4.SelectedExpertsMoeOfTTokensHasOneTokenRoutedBitsAndSkinnySharedBits), not one token's.
      const DecodeMoeOut got =
          expect_step_matches_one_token_steps(run, T, H, K, x, ids, tw, h0, where, !nvfp4_moe_shared_skinny(T));
      std::vector<bf16> h_ref = h0;
      moe_float_ref(x, T, H, I, Is, MoeFloatWeights{&w.fg, &w.fu, &w.fd, &fsg, &fsu, &fsd}, ids, tw, K, h_ref);
      const auto ch = compare(got.h, h_ref, 2 * kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(ch.ok()) << where << "h vs moe_float_ref " << ch.describe();
    }
}

}  // namespace
}  // namespace striker::cuda::testing
