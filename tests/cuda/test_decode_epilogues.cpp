// The last-block epilogues of the decode kernels (common/last_block.cuh) against their CPU
// references, BF16 and NVFP4 weights: the residual GEMV followed in the same launch by the next
// RMSNorm (NormEpilogue), and the QKV GEMV followed by each head's q/k-norm, RoPE and cache write
// (QkvEpilogue). The projection itself is checked against the double-accumulating reference; the
// epilogue is checked against the CPU reference applied to the GPU's own projection output, so a
// bf16 rounding tie in the projection cannot fail it. Every launch must leave its counters at zero.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>

#include "backends/cuda/attention/qk_rope_kv.h"
#include "backends/cuda/elementwise/rmsnorm.h"
#include "backends/cuda/linear/gemv.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "cuda_test_util.h"
#include "nvfp4_test_util.h"

namespace striker::cuda::testing {
namespace {

// A weight in either format with its reference dot products and its two fused launchers.
struct Weight {
  bool nvfp4;
  std::vector<bf16> bf;
  Nvfp4HostMatrix nv;
  RowScale2 s2;
  int in, out;
};

Weight random_weight(std::mt19937& rng, bool nvfp4, int in, int out) {
  Weight w{nvfp4, {}, {}, RowScale2{out / 3, out / 3 + out / 5 + 1, {0.0137f, 0.0021f, 0.0433f}}, in, out};
  if (nvfp4) w.nv = random_matrix(rng, out, in);
  else w.bf = random_bf16(rng, size_t(out) * in, 0.05f);
  return w;
}

std::vector<float> reference_dot(const Weight& w, const std::vector<bf16>& x, int T) {
  std::vector<float> dot;
  if (w.nvfp4) nvfp4_gemv_ref(x, T, w.in, w.nv, w.s2, w.out, dot);
  else gemv_ref(x, T, w.in, w.bf, w.out, dot);
  for (float& v : dot) v = round_bf16(v);
  return dot;
}

struct DeviceWeight {
  DeviceBuffer<bf16> bf;
  std::unique_ptr<DeviceMatrix> nv;
  explicit DeviceWeight(const Weight& w) : bf(w.nvfp4 ? std::vector<bf16>(8) : w.bf) {
    if (w.nvfp4) nv = std::make_unique<DeviceMatrix>(w.nv);
  }
};

struct Shape {
  int T, in, out;
};

const char* format(bool nvfp4) { return nvfp4 ? "nvfp4" : "bf16"; }

TEST(CudaDecodeEpilogue, ResidualGemvThenNormMatchesReference) {
  std::mt19937 rng(91);
  for (bool nvfp4 : {false, true})
    for (Shape s : {Shape{1, 4096, 2048}, Shape{3, 2048, 1000}, Shape{8, 576, 2048}, Shape{1, 8192, 2048},
                    Shape{5, 1024, 40}}) {
      SCOPED_TRACE(std::string(format(nvfp4)) + " T=" + std::to_string(s.T) + " in=" + std::to_string(s.in) +
                   " out=" + std::to_string(s.out));
      const Weight w = random_weight(rng, nvfp4, s.in, s.out);
      const DeviceWeight dw(w);
      auto x = random_bf16(rng, size_t(s.T) * s.in);
      auto h = random_bf16(rng, size_t(s.T) * s.out);
      auto gamma = random_f32(rng, size_t(s.out), 1.f, 0.2f);
      const auto dot = reference_dot(w, x, s.T);
      std::vector<float> h_ref(h.size());
      for (size_t i = 0; i < h.size(); ++i) h_ref[i] = round_bf16(bf16_to_float(h[i]) + dot[i]);

      DeviceBuffer<bf16> d_x(x), d_h(h), d_out(h.size());
      DeviceBuffer<float> d_gamma(gamma);
      auto counters = zero_counters(1);
      d_out.poison();
      const NormEpilogue ep{counters.get(), d_gamma.get(), d_out.get(), 1e-6f};
      if (nvfp4) nvfp4_gemv_residual(d_x.get(), s.T, s.in, dw.nv->view(), w.s2, s.out, d_h.get(), nullptr, ep);
      else gemv_residual(d_x.get(), s.T, s.in, dw.bf.get(), s.out, d_h.get(), nullptr, ep);
      const auto got_h = d_h.download();
      auto c = compare(to_float(got_h), h_ref, kBf16Rtol, 1e-3);
      EXPECT_TRUE(c.ok()) << "h " << c.describe();
      std::vector<bf16> ref_out;
      rmsnorm_ref(got_h, gamma, ref_out, s.T, s.out, 1e-6f);
      c = compare(d_out.download(), ref_out, 2 * kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(c.ok()) << "norm " << c.describe();
      EXPECT_TRUE(counters_are_zero(counters));
    }
}

struct Heads {
  int nh, nkv, d;
};

TEST(CudaDecodeEpilogue, QkvGemvThenHeadFrontMatchesReference) {
  std::mt19937 rng(92);
  const int B = 16, num_blocks = 24;
  for (bool nvfp4 : {false, true})
    for (Heads g : {Heads{32, 4, 128}, Heads{8, 2, 64}, Heads{4, 1, 32}})
      for (int T : {1, 5, 8})
        for (bool rope : {true, false}) {
          const int in = nvfp4 ? 1024 : 520, out = (g.nh + 2 * g.nkv) * g.d;
          SCOPED_TRACE(std::string(format(nvfp4)) + " d=" + std::to_string(g.d) + " T=" + std::to_string(T) +
                       (rope ? " rope" : " nope"));
          const Weight w = random_weight(rng, nvfp4, in, out);
          const DeviceWeight dw(w);
          auto x = random_bf16(rng, size_t(T) * in, 2.f);
          std::vector<int32_t> positions;
          std::vector<int64_t> slots;
          for (int t = 0; t < T; ++t) {
            positions.push_back(int32_t((t * 40503 + 7) % 262144));
            slots.push_back(int64_t(t * 37 + 5) % (num_blocks * B));
          }
          auto qw = random_f32(rng, size_t(g.d), 1.f, 0.2f), kw = random_f32(rng, size_t(g.d), 1.f, 0.2f);
          const auto inv = rope_inv_freq(10000.f, g.d);
          const size_t cache = size_t(num_blocks) * g.nkv * B * g.d;
          DeviceBuffer<bf16> d_x(x), d_qkv(size_t(T) * out), d_k(cache), d_v(cache), d_q(size_t(T) * g.nh * g.d);
          DeviceBuffer<float> d_qw(qw), d_kw(kw), d_inv(inv);
          DeviceBuffer<int32_t> d_pos(positions);
          DeviceBuffer<int64_t> d_slots(slots);
          auto counters = zero_counters(size_t(out / g.d));
          for (auto* b : {&d_qkv, &d_k, &d_v, &d_q}) b->poison();
          std::vector<bf16> ref_k = d_k.download(), ref_v = d_v.download(), ref_q;
          const QkvEpilogue front{counters.get(), g.nh, g.nkv, g.d, d_qw.get(), d_kw.get(), 1e-6f, d_pos.get(),
                                  rope ? d_inv.get() : nullptr, d_slots.get(), B, d_k.get(), d_v.get(), d_q.get()};
          if (nvfp4) nvfp4_gemv_qkv_rope(d_x.get(), T, in, dw.nv->view(), w.s2, out, d_qkv.get(), front, nullptr);
          else gemv_qkv_rope(d_x.get(), T, in, dw.bf.get(), out, d_qkv.get(), front, nullptr);
          const auto qkv = d_qkv.download();
          auto c = compare(to_float(qkv), reference_dot(w, x, T), kBf16Rtol, 1e-3);
          EXPECT_TRUE(c.ok()) << "qkv " << c.describe();
          qk_norm_rope_kv_write_ref(qkv, T, HeadShape{g.nh, g.nkv, g.d}, qw, kw, 1e-6f, positions,
                                    rope ? &inv : nullptr, slots, B, ref_k, ref_v, ref_q);
          c = compare(d_q.download(), ref_q, 2 * kBf16Rtol, kBf16Atol);
          EXPECT_TRUE(c.ok()) << "q " << c.describe();
          c = compare(d_k.download(), ref_k, 2 * kBf16Rtol, kBf16Atol);
          EXPECT_TRUE(c.ok()) << "k cache " << c.describe();
          c = compare(d_v.download(), ref_v, 0.0, 0.0);
          EXPECT_TRUE(c.ok()) << "v cache " << c.describe();
          EXPECT_TRUE(counters_are_zero(counters));
        }
}

TEST(CudaDecodeEpilogue, RefusesMoreTokensThanOnePass) {
  DeviceBuffer<bf16> x(size_t(9) * 64), W(size_t(64) * 64), h(size_t(9) * 64);
  DeviceBuffer<float> gamma(64);
  auto counters = zero_counters(1);
  const NormEpilogue ep{counters.get(), gamma.get(), x.get(), 1e-6f};
  EXPECT_THROW(gemv_residual(x.get(), 9, 64, W.get(), 64, h.get(), nullptr, ep), Error);
}

}  // namespace
}  // namespace striker::cuda::testing
