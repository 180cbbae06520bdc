// Host-only checks for the NVFP4 grouped MoE: the tile-decode thread mapping of 64-row tiles (every
// (row, 16-byte chunk) of a weight tile written once, its shared-memory stores free of bank
// conflicts), the register-fragment mapping of 16-row tiles (one warp's k tile replayed against the
// PTX fragment definitions; its shared-memory A loads free of bank conflicts)
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
#include "ptx_fragments.h"
#include "warp_tile_product.h"

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

// One warp's k tile on the register-fragment path, replayed with the PTX ISA's mma.m16n8k16
// (ptx_fragments.h): A fragments read as the kernel reads them (words q and q+2 of the 16-byte chunk
// nvfp4_frag_a_chunk(lane, p) of rows g and g+8 for step 2p+q, paired by halves: a0/a1 the low
// halves, a2/a3 the high), B fragments made as its decode makes them (word p of scale group
// nvfp4_frag_group(lane) of rows wn+g and wn+8+g: weights 2q, 2q+4 in b0, 2q+1, 2q+5 in b1). The
// product must be the tile's whole dot product (every k used once, A and B in the same order), and
// every slot the k that nvfp4_pair_frag_k names (the order the GPU test replays on the BF16 kernels).
TEST(MoeGroupedNvfp4Layout, RegisterFragmentsComputeTheTileProduct) {
  using namespace striker::cuda::ptx_host;
  constexpr int TM = 32;
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(-4, 4);  // exact in float sums
  std::vector<float> A(size_t(TM) * kBK), W(size_t(kBN) * kBK), sa(A.size());
  for (auto& v : A) v = float(small(rng));
  for (auto& v : W) v = float(small(rng));
  for (int r = 0; r < TM; ++r)
    for (int k = 0; k < kBK; ++k) sa[size_t(swizzled(r, k / 8) + k % 8)] = A[size_t(r) * kBK + k];
  for (int warp = 0; warp < kGroupedThreads / 32; ++warp) {
    const int wn = warp * 16;
    Acc acc[TM / 16][2] = {};
    for (int ks = 0; ks < kBK / 16; ++ks) {
      const int p = ks / 2, q = ks % 2;
      for (int m = 0; m < TM / 16; ++m) {
        std::array<Regs4, 32> a{};
        for (int lane = 0; lane < 32; ++lane) {
          const int g = lane / 4;
          for (int h = 0; h < 2; ++h) {  // rows 16m+g (registers 0, 2) and 16m+8+g (1, 3)
            const int base = swizzled(16 * m + 8 * h + g, nvfp4_frag_a_chunk(lane, p));
            // element e of the chunk is half e % 2 of word e / 2: words q and q+2 are elements 2q, 2q+1, 2q+4, 2q+5
            a[size_t(lane)][size_t(h)] = {sa[size_t(base + 2 * q)], sa[size_t(base + 2 * q + 4)]};
            a[size_t(lane)][size_t(h + 2)] = {sa[size_t(base + 2 * q + 1)], sa[size_t(base + 2 * q + 5)]};
          }
          for (int reg = 0; reg < 4; ++reg)
            for (int e = 0; e < 2; ++e) {
              const int row = 16 * m + (lane / 4) + ((reg & 1) ? 8 : 0);
              const int slot = 2 * (lane % 4) + e + ((reg & 2) ? 8 : 0);
              ASSERT_EQ(a[size_t(lane)][size_t(reg)][size_t(e)], A[size_t(row) * kBK + nvfp4_pair_frag_k(ks, slot)])
                  << "A slot " << slot << " of step " << ks << " is not k " << nvfp4_pair_frag_k(ks, slot);
            }
        }
        for (int t = 0; t < 2; ++t) {
          std::array<Reg, 32> b0{}, b1{};
          for (int lane = 0; lane < 32; ++lane) {
            const int n = wn + 8 * t + lane / 4, c = lane % 4, k0 = 16 * nvfp4_frag_group(lane) + 8 * p + 2 * q;
            b0[size_t(lane)] = {W[size_t(n) * kBK + k0], W[size_t(n) * kBK + k0 + 4]};  // nvfp4_pair_bf16<2q>
            b1[size_t(lane)] = {W[size_t(n) * kBK + k0 + 1], W[size_t(n) * kBK + k0 + 5]};  // <2q + 1>
            for (int e = 0; e < 2; ++e) {
              ASSERT_EQ(k0 + 4 * e, nvfp4_pair_frag_k(ks, 2 * c + e));
              ASSERT_EQ(k0 + 1 + 4 * e, nvfp4_pair_frag_k(ks, 2 * c + 8 + e));
            }
          }
          mma(acc[m][t], a, b0, b1);
        }
      }
    }
    expect_warp_tile_product<TM>(acc, A, W, warp);
  }
}

// A warp's 16-byte ld.shared of A runs as four 8-lane phases; each phase's eight rows/chunks must
// fall in eight different 16-byte bank groups, for both halves (rows g, g+8) and both chunk pairs.
TEST(MoeGroupedNvfp4Layout, RegisterFragmentALoadsAreBankConflictFree) {
  for (int m = 0; m < 4; ++m)
    for (int h = 0; h < 2; ++h)
      for (int p = 0; p < 2; ++p)
        for (int phase = 0; phase < 4; ++phase) {
          std::set<int> groups;
          for (int lane = 8 * phase; lane < 8 * phase + 8; ++lane)
            groups.insert((swizzled(16 * m + 8 * h + lane / 4, nvfp4_frag_a_chunk(lane, p)) / 8) % 8);
          EXPECT_EQ(groups.size(), 8u) << "m " << m << " half " << h << " chunk pair " << p << " phase " << phase;
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
