// NormAfter (rmsnorm.h): a residual GEMV (BF16 or NVFP4) whose last block also writes
// rmsnorm(h). Both h and the norm output must equal, bit for bit, the unfused launches
// (residual GEMV, then rmsnorm) on the same inputs; the norm output is NaN-poisoned first; the
// block counter must be back at 0 after every launch (checked over repeated launches).
#include <gtest/gtest.h>

#include <cstring>

#include "backends/cuda/gemv.h"
#include "backends/cuda/nvfp4_linear.h"
#include "backends/cuda/rmsnorm.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {
namespace {

struct NormShape {
  int T, in, out;
};

bool same_bits(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(bf16)) == 0;
}

size_t first_difference(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(bf16)) != 0) return i;
  return a.size();
}

template <typename Launch>
void expect_fused_equals_unfused(std::mt19937& rng, const NormShape& s, const Launch& residual) {
  const float eps = 1e-6f;
  auto w = random_f32(rng, size_t(s.out), 1.f, 0.2f);
  DeviceBuffer<float> d_w(w);
  DeviceBuffer<unsigned> d_done(std::vector<unsigned>{0u});
  for (int rep = 0; rep < 3; ++rep) {  // new h each time: the counter must have been reset
    SCOPED_TRACE("launch " + std::to_string(rep));
    auto h0 = random_bf16(rng, size_t(s.T) * s.out, 4.f);
    DeviceBuffer<bf16> h_a(h0), h_b(h0), out_a(h0.size()), out_b(h0.size());
    out_a.poison();
    out_b.poison();
    residual(h_a.get(), NormAfter{});
    rmsnorm(h_a.get(), d_w.get(), out_a.get(), s.T, s.out, eps, nullptr);
    residual(h_b.get(), NormAfter{d_w.get(), out_b.get(), eps, d_done.get()});
    const auto ha = h_a.download(), hb = h_b.download(), oa = out_a.download(), ob = out_b.download();
    EXPECT_TRUE(same_bits(ha, hb)) << "h differs from the unfused launch at " << first_difference(ha, hb);
    EXPECT_TRUE(same_bits(oa, ob)) << "fused norm output differs from rmsnorm() at element "
                                   << first_difference(oa, ob) << " (NaN = never written)";
    const auto fo = to_float(ob);
    size_t nans = 0;
    for (float v : fo) nans += std::isnan(v) ? 1 : 0;
    EXPECT_EQ(nans, 0u) << "norm output elements left unwritten (NaN poison)";
    EXPECT_EQ(d_done.download(), std::vector<unsigned>{0u}) << "the block counter was not reset to 0";
  }
}

const NormShape kShapes[] = {{1, 4096, 2048}, {1, 2048, 2048}, {3, 1024, 1000}, {8, 576, 300}, {2, 8192, 2050}};

TEST(CudaNormAfter, Bf16ResidualGemvWritesTheSameNormAsRmsnorm) {
  std::mt19937 rng(91);
  for (const NormShape& s : kShapes) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " in=" + std::to_string(s.in) + " out=" + std::to_string(s.out));
    auto x = random_bf16(rng, size_t(s.T) * s.in);
    auto W = random_bf16(rng, size_t(s.out) * s.in, 0.03f);
    DeviceBuffer<bf16> d_x(x), d_W(W);
    expect_fused_equals_unfused(rng, s, [&](bf16* h, const NormAfter& after) {
      gemv_residual(d_x.get(), s.T, s.in, d_W.get(), s.out, h, nullptr, after);
    });
  }
}

TEST(CudaNormAfter, Nvfp4ResidualGemvWritesTheSameNormAsRmsnorm) {
  std::mt19937 rng(92);
  for (const NormShape& s : kShapes) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " in=" + std::to_string(s.in) + " out=" + std::to_string(s.out));
    auto x = random_bf16(rng, size_t(s.T) * s.in);
    std::vector<uint8_t> codes(size_t(s.out) * (s.in / 2)), scales(size_t(s.out) * (s.in / 16));
    for (auto& c : codes) c = uint8_t(rng() & 0xFF);
    for (auto& c : scales) c = uint8_t(0x30 + rng() % 16);
    DeviceBuffer<bf16> d_x(x);
    DeviceBuffer<uint8_t> d_codes(codes), d_scales(scales);
    const RowScale2 s2 = RowScale2::uniform(0.0137f);
    expect_fused_equals_unfused(rng, s, [&](bf16* h, const NormAfter& after) {
      nvfp4_gemv_residual(d_x.get(), s.T, s.in, Nvfp4Matrix{d_codes.get(), d_scales.get()}, s2, s.out, h, nullptr,
                          after);
    });
  }
}

TEST(CudaNormAfter, MoreThanEightTokensIsRefused) {
  DeviceBuffer<bf16> d_x(size_t(9) * 64), d_W(size_t(16) * 64), d_h(size_t(9) * 16), d_out(size_t(9) * 16);
  DeviceBuffer<float> d_w(16);
  DeviceBuffer<unsigned> d_done(std::vector<unsigned>{0u});
  EXPECT_THROW(gemv_residual(d_x.get(), 9, 64, d_W.get(), 16, d_h.get(), nullptr,
                             NormAfter{d_w.get(), d_out.get(), 1e-6f, d_done.get()}),
               Error);
}

}  // namespace
}  // namespace striker::cuda::testing
