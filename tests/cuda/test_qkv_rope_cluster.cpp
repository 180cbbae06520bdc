// qkv_rope_kv_cluster (QKV GEMV + q/k-norm + RoPE + KV-cache write in one cluster launch) must
// write exactly what gemv_bf16 followed by qk_norm_rope_kv_write writes: q, the k cache and the v
// cache, bit for bit, for T = 1..8, with and without RoPE, for input widths on both sides of
// gemv.cu's split-K decision (in >= 2048: 8 warps per row) and widths that are not multiples of
// the 256-chunk tile. The NVFP4 form likewise against nvfp4_gemv (three scale2 ranges for q|k|v)
// + qk_norm_rope_kv_write. Outputs are NaN-poisoned; slots nobody writes stay NaN in both. The CPU
// reference (gemv_ref / nvfp4_gemv_ref, bf16, qk_norm_rope_kv_write_ref) checks the fused outputs
// within bf16 tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/gemv.h"
#include "backends/cuda/nvfp4_linear.h"
#include "backends/cuda/qk_rope_kv.h"
#include "backends/cuda/qkv_rope_cluster.h"
#include "core/error.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {
namespace {

std::string first_bit_difference(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  if (a.size() != b.size()) return "sizes differ";
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(bf16)) != 0)
      return "first difference at " + std::to_string(i) + ": " + std::to_string(bf16_to_float(a[i])) + " vs " +
             std::to_string(bf16_to_float(b[i]));
  return "";
}

struct Case {
  int nh, nkv, d, in;
};

// The weights of one case, BF16 or NVFP4, on the device and on the host.
struct Weights {
  bool nvfp4 = false;
  std::vector<bf16> W;  // BF16 [qkv_dim, in]
  DeviceBuffer<bf16> d_W;
  Nvfp4HostMatrix nv;   // NVFP4 codes / scales
  DeviceBuffer<uint8_t> d_codes, d_scales;
  RowScale2 s2;
};

Weights make_weights(std::mt19937& rng, const Case& g, bool nvfp4) {
  const int qkv_dim = (g.nh + 2 * g.nkv) * g.d;
  Weights w;
  w.nvfp4 = nvfp4;
  if (!nvfp4) {
    w.W = random_bf16(rng, size_t(qkv_dim) * g.in, 1.f / std::sqrt(float(g.in)));
    w.d_W = DeviceBuffer<bf16>(w.W);
    return w;
  }
  w.nv.codes.resize(size_t(qkv_dim) * size_t(g.in / 2));
  w.nv.scales.resize(size_t(qkv_dim) * size_t(g.in / 16));
  for (auto& c : w.nv.codes) c = uint8_t(rng() & 0xFF);
  std::uniform_int_distribution<int> sd(0x30, 0x40);
  for (auto& sc : w.nv.scales) sc = uint8_t(sd(rng));
  w.d_codes = DeviceBuffer<uint8_t>(w.nv.codes);
  w.d_scales = DeviceBuffer<uint8_t>(w.nv.scales);
  // q, k and v with three different global scales, as a real checkpoint's fused q|k|v.
  w.s2 = RowScale2{g.nh * g.d, (g.nh + g.nkv) * g.d, {0.004f, 0.0031f, 0.0057f}};
  return w;
}

void check_cases(const std::vector<Case>& cases, bool nvfp4, uint32_t seed) {
  std::mt19937 rng(seed);
  for (const Case& g : cases) {
    const int heads = g.nh + 2 * g.nkv, qkv_dim = heads * g.d;
    const Weights wt = make_weights(rng, g, nvfp4);
    const auto qw = random_f32(rng, size_t(g.d), 1.f, 0.2f), kw = random_f32(rng, size_t(g.d), 1.f, 0.2f);
    const auto inv = rope_inv_freq(10000.f, g.d);
    DeviceBuffer<float> d_qw(qw), d_kw(kw), d_inv(inv);
    for (int T = 1; T <= kQkvClusterMaxTokens; ++T) {
      for (bool rope : {true, false}) {
        SCOPED_TRACE(std::string(nvfp4 ? "NVFP4" : "BF16") + " heads " + std::to_string(g.nh) + "/" +
                     std::to_string(g.nkv) + " d=" + std::to_string(g.d) + " in=" + std::to_string(g.in) +
                     " T=" + std::to_string(T) + (rope ? " rope" : " nope"));
        const HeadShape hs{g.nh, g.nkv, g.d};
        const int B = 16, num_blocks = 24;
        std::vector<int32_t> positions;
        std::vector<int64_t> slots;
        std::uniform_int_distribution<int32_t> pos(0, 262143);
        for (int t = 0; t < T; ++t) {
          positions.push_back(t == 0 ? 262143 : pos(rng));
          slots.push_back(int64_t(t * 53 + 7) % (num_blocks * B));
        }
        const auto x = random_bf16(rng, size_t(T) * g.in, 1.f);
        DeviceBuffer<bf16> d_x(x), d_qkv(size_t(T) * qkv_dim);
        DeviceBuffer<int32_t> d_pos(positions);
        DeviceBuffer<int64_t> d_slots(slots);
        const size_t cache_elems = size_t(num_blocks) * g.nkv * B * g.d;
        const Nvfp4Matrix nvm{wt.d_codes.get(), wt.d_scales.get()};
        std::vector<bf16> out[2][3];  // [old, fused][q, k cache, v cache]
        for (int fused = 0; fused < 2; ++fused) {
          DeviceBuffer<bf16> d_k(cache_elems), d_v(cache_elems), d_q(size_t(T) * g.nh * g.d);
          d_k.poison();
          d_v.poison();
          d_q.poison();
          d_qkv.poison();
          const float* inv_p = rope ? d_inv.get() : nullptr;
          if (fused && nvfp4) {
            qkv_rope_kv_cluster_nvfp4(d_x.get(), T, g.in, nvm, wt.s2, hs, d_qw.get(), d_kw.get(), 1e-6f, d_pos.get(),
                                      inv_p, d_slots.get(), B, d_k.get(), d_v.get(), d_q.get(), nullptr);
          } else if (fused) {
            qkv_rope_kv_cluster(d_x.get(), T, g.in, wt.d_W.get(), hs, d_qw.get(), d_kw.get(), 1e-6f, d_pos.get(),
                                inv_p, d_slots.get(), B, d_k.get(), d_v.get(), d_q.get(), nullptr);
          } else {
            if (nvfp4) nvfp4_gemv(d_x.get(), T, g.in, nvm, wt.s2, qkv_dim, d_qkv.get(), nullptr);
            else gemv_bf16(d_x.get(), T, g.in, wt.d_W.get(), qkv_dim, d_qkv.get(), nullptr);
            qk_norm_rope_kv_write(d_qkv.get(), T, hs, d_qw.get(), d_kw.get(), 1e-6f, d_pos.get(), inv_p,
                                  d_slots.get(), B, d_k.get(), d_v.get(), d_q.get(), nullptr);
          }
          out[fused][0] = d_q.download();
          out[fused][1] = d_k.download();
          out[fused][2] = d_v.download();
        }
        const char* names[3] = {"q", "k cache", "v cache"};
        for (int i = 0; i < 3; ++i) {
          const std::string diff = first_bit_difference(out[0][i], out[1][i]);
          EXPECT_TRUE(diff.empty()) << "fused vs GEMV + qk_rope, " << names[i] << ": " << diff;
        }
        // Not vacuous: every q element holds a number.
        size_t q_nan = 0;
        for (const bf16& v : out[1][0]) q_nan += std::isnan(bf16_to_float(v)) ? 1 : 0;
        EXPECT_EQ(q_nan, 0u) << "fused q still holds poison";

        // CPU reference: double-accumulated dot products rounded to bf16, then the per-head reference.
        std::vector<float> dot;
        if (nvfp4) nvfp4_gemv_ref(x, T, g.in, wt.nv, wt.s2, qkv_dim, dot);
        else gemv_ref(x, T, g.in, wt.W, qkv_dim, dot);
        std::vector<bf16> qkv_ref(dot.size());
        for (size_t i = 0; i < dot.size(); ++i) qkv_ref[i] = float_to_bf16(dot[i]);
        DeviceBuffer<bf16> poisoned(cache_elems);
        poisoned.poison();
        std::vector<bf16> ref_k = poisoned.download(), ref_v = ref_k, ref_q;
        qk_norm_rope_kv_write_ref(qkv_ref, T, hs, qw, kw, 1e-6f, positions, rope ? &inv : nullptr, slots, B, ref_k,
                                  ref_v, ref_q);
        auto c = compare(out[1][0], ref_q, 3 * kBf16Rtol, 2 * kBf16Atol);
        EXPECT_TRUE(c.ok()) << "fused q vs CPU reference: " << c.describe();
        c = compare(out[1][1], ref_k, 3 * kBf16Rtol, 2 * kBf16Atol);
        EXPECT_TRUE(c.ok()) << "fused k cache vs CPU reference: " << c.describe();
        c = compare(out[1][2], ref_v, kBf16Rtol, kBf16Atol);
        EXPECT_TRUE(c.ok()) << "fused v cache vs CPU reference: " << c.describe();
      }
    }
  }
}

TEST(CudaQkvRopeCluster, Bf16BitIdenticalToGemvThenQkRopeAndNearReference) {
  // Flint (32/4/128, in 2048: 8 warps per row); wider, not a multiple of 256 chunks; short rows (one
  // warp per row); small heads with odd widths.
  check_cases({Case{32, 4, 128, 2048}, Case{8, 2, 128, 2056}, Case{6, 1, 128, 200}, Case{8, 1, 32, 520},
               Case{12, 2, 64, 3000}, Case{4, 1, 64, 1000}},
              false, 2026);
}

TEST(CudaQkvRopeCluster, Nvfp4BitIdenticalToNvfp4GemvThenQkRopeAndNearReference) {
  // Flint (in 2048: one warp per row); in 4160 (130 chunks: 4 warps per row, not a multiple of the
  // 128-chunk split); short rows; small heads.
  check_cases({Case{32, 4, 128, 2048}, Case{8, 2, 128, 4160}, Case{6, 1, 128, 192}, Case{8, 1, 32, 4096},
               Case{12, 2, 64, 640}},
              true, 2027);
}

TEST(CudaQkvRopeCluster, RejectsUnsupportedShapes) {
  const HeadShape hs{8, 1, 128};
  DeviceBuffer<bf16> x(9 * 64), W(size_t(10) * 128 * 64), q(9 * 8 * 128), k(128), v(128);
  auto call = [&](int T, int in, const HeadShape& s) {
    qkv_rope_kv_cluster(x.get(), T, in, W.get(), s, nullptr, nullptr, 1e-6f, nullptr, nullptr, nullptr, 16, k.get(),
                        v.get(), q.get(), nullptr);
  };
  EXPECT_THROW(call(0, 64, hs), Error);
  EXPECT_THROW(call(9, 64, hs), Error);
  EXPECT_THROW(call(1, 60, hs), Error);
  EXPECT_THROW(call(1, 64, HeadShape{8, 1, 96}), Error);
  // NVFP4 rows must be a multiple of 64 weights.
  DeviceBuffer<uint8_t> codes(size_t(10) * 128 * 32), scales(size_t(10) * 128 * 4);
  EXPECT_THROW(qkv_rope_kv_cluster_nvfp4(x.get(), 1, 56, Nvfp4Matrix{codes.get(), scales.get()}, RowScale2{}, hs,
                                         nullptr, nullptr, 1e-6f, nullptr, nullptr, nullptr, 16, k.get(), v.get(),
                                         q.get(), nullptr),
               Error);
}

}  // namespace
}  // namespace striker::cuda::testing
