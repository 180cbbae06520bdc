// Host-only checks for the NVFP4 grouped MoE: the tile-decode thread mapping (every (row,
// 16-byte chunk) of a weight tile written once, its shared-memory stores free of bank conflicts)
// and the NVFP4 grouped references, which the GPU tests trust: with power-of-two scale2 every
// product is exact, so sort + grouped gate/up + down + combine must equal the per-token
// reference moe_float_ref bit for bit; with other scale2 values, within one bf16 step.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "backends/cuda/moe/moe_grouped.h"
#include "backends/cuda/moe/moe_grouped_layout.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "backends/cuda/nvfp4/nvfp4_moe.h"
#include "cuda_test_util.h"
#include "moe_routing_util.h"

namespace striker::cuda::testing {
namespace {

TEST(MoeGroupedNvfp4Layout, DecodeThreadsWriteEachTileChunkOnce) {
  std::vector<int> hits(size_t(kBN) * 8, 0);
  for (int tid = 0; tid < kGroupedThreads; ++tid)
    for (int c = 0; c < 4; ++c) {
      const int r = nvfp4_tile_row(tid), chunk = nvfp4_tile_half(tid) * 4 + c;
      ASSERT_LT(r, kBN);
      ASSERT_LT(chunk, 8);
      ++hits[size_t(r) * 8 + size_t(chunk)];
    }
  for (size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i], 1) << "row " << i / 8 << " chunk " << i % 8;
}

// A warp's 16-byte st.shared runs as four 8-lane phases; the eight chunks of a phase must fall
// in eight different 16-byte bank groups for each of the four stores (c = 0..3).
TEST(MoeGroupedNvfp4Layout, DecodeStoresAreBankConflictFree) {
  for (int warp = 0; warp < kGroupedThreads / 32; ++warp)
    for (int c = 0; c < 4; ++c)
      for (int phase = 0; phase < 4; ++phase) {
        std::set<int> groups;
        for (int lane = 8 * phase; lane < 8 * phase + 8; ++lane) {
          const int tid = warp * 32 + lane;
          groups.insert((swizzled(nvfp4_tile_row(tid), nvfp4_tile_half(tid) * 4 + c) / 8) % 8);
        }
        EXPECT_EQ(groups.size(), 8u) << "warp " << warp << " store " << c << " phase " << phase;
      }
}

Nvfp4HostMatrix random_nvfp4(std::mt19937& rng, int64_t rows, int in) {
  Nvfp4HostMatrix m;
  m.codes.resize(size_t(rows) * size_t(in / 2));
  m.scales.resize(size_t(rows) * size_t(in / 16));
  for (auto& c : m.codes) c = uint8_t(rng() & 0xFF);
  for (auto& s : m.scales) s = uint8_t(0x30 + rng() % 16);
  return m;
}

std::vector<float> scaled_floats(const Nvfp4HostMatrix& m, int64_t rows, int in, const std::vector<float>& s2,
                                 int64_t per_expert) {
  auto f = nvfp4_dequantize_ref(m, rows, in);
  for (size_t i = 0; i < f.size(); ++i) f[i] *= s2[i / size_t(per_expert)];
  return f;
}

void run_grouped_vs_per_token(bool power_of_two) {
  std::mt19937 rng(power_of_two ? 21 : 22);
  const int E = 16, H = 128, I = 64, K = 4;  // skewed routings need E >= 16
  const auto g = random_nvfp4(rng, int64_t(E) * I, H), u = random_nvfp4(rng, int64_t(E) * I, H);
  const auto d = random_nvfp4(rng, int64_t(E) * H, I);
  std::vector<float> s2g, s2u, s2d;
  for (int e = 0; e < E; ++e) {
    const float p = std::ldexp(1.f, -5 - e % 3);
    s2g.push_back(power_of_two ? p : 0.011f * (1 + 0.3f * float(e)));
    s2u.push_back(power_of_two ? 2 * p : 0.007f * (1 + 0.2f * float(e)));
    s2d.push_back(power_of_two ? p / 2 : 0.013f / (1 + 0.1f * float(e)));
  }
  const auto fg = scaled_floats(g, int64_t(E) * I, H, s2g, int64_t(I) * H);
  const auto fu = scaled_floats(u, int64_t(E) * I, H, s2u, int64_t(I) * H);
  const auto fd = scaled_floats(d, int64_t(E) * H, I, s2d, int64_t(H) * I);
  for (int T : {9, 37})
    for (RoutingKind kind : {RoutingKind::uniform, RoutingKind::skewed}) {
      SCOPED_TRACE("T=" + std::to_string(T) + " " + routing_name(kind));
      const auto ids = make_routing(rng, kind, T, K, E);
      const auto tw = random_f32(rng, ids.size(), 0.4f, 0.2f);
      const auto x = random_bf16(rng, size_t(T) * H);
      const auto h0 = random_bf16(rng, size_t(T) * H);
      std::vector<bf16> h_ref = h0, h = h0;
      moe_float_ref(x, T, H, I, 0, MoeFloatWeights{&fg, &fu, &fd, nullptr, nullptr, nullptr}, ids, tw, K, h_ref);
      std::vector<int32_t> sorted, row;
      std::vector<MoeTile> tiles;
      moe_route_sort_ref(ids, T, K, E, 16, sorted, row, tiles);
      std::vector<bf16> act, y;
      moe_grouped_gate_up_nvfp4_ref(x, K, H, g, s2g, u, s2u, I, sorted, tiles, act);
      moe_grouped_down_nvfp4_ref(act, I, d, s2d, H, tiles, y);
      moe_combine_sorted_ref(y, row, tw, {}, T, K, H, h);
      if (power_of_two) {
        for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(h[i].bits, h_ref[i].bits) << "element " << i;
      } else {
        const auto c = compare(h, h_ref, 2 * kBf16Rtol, kBf16Atol);
        EXPECT_TRUE(c.ok()) << c.describe();
        size_t same = 0;
        for (size_t i = 0; i < h.size(); ++i) same += h[i].bits == h_ref[i].bits;
        EXPECT_GT(same, h.size() * 9 / 10) << "the two references should differ only in rare last-bit roundings";
      }
    }
}

TEST(MoeGroupedNvfp4Ref, PowerOfTwoScale2MatchesPerTokenReferenceExactly) { run_grouped_vs_per_token(true); }
TEST(MoeGroupedNvfp4Ref, OtherScale2MatchesPerTokenReferenceWithinRounding) { run_grouped_vs_per_token(false); }

}  // namespace
}  // namespace striker::cuda::testing
