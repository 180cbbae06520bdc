// Embedding gather, the async steps' token taking and RMSNorm against their CPU references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <random>

#include "backends/cuda/elementwise/embedding.h"
#include "backends/cuda/elementwise/rmsnorm.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {
namespace {

TEST(CudaEmbedding, GathersRowsAndMarksInvalidIdsNaN) {
  std::mt19937 rng(11);
  for (int64_t hidden : {200, 203, 2048}) {  // 203: the unaligned scalar path
    const int64_t vocab = 997;
    auto table = random_bf16(rng, size_t(vocab * hidden));
    std::vector<int32_t> ids = {0, 996, 5, -3, 1000, 17, 17};
    std::uniform_int_distribution<int32_t> pick(0, int32_t(vocab - 1));
    for (int i = 0; i < 20; ++i) ids.push_back(pick(rng));
    std::vector<bf16> ref;
    embedding_gather_ref(table, vocab, hidden, ids, ref);
    DeviceBuffer<bf16> d_table(table), d_out(ids.size() * size_t(hidden));
    DeviceBuffer<int32_t> d_ids(ids);
    d_out.poison();
    embedding_gather(d_table.get(), vocab, hidden, d_ids.get(), int(ids.size()), d_out.get(), nullptr);
    const auto got = d_out.download();
    const auto c = compare(got, ref, 0.0, 0.0);  // a gather is exact
    EXPECT_TRUE(c.ok()) << "hidden=" << hidden << " " << c.describe();
  }
}

// Async scheduling: a step's stand-in tokens replaced by the previous step's draws, every other
// token left as it was (non-multiple counts, more tokens than one CTA's threads).
TEST(CudaEmbedding, TakeDrawnTokensMatchesReference) {
  std::mt19937 rng(13);
  for (int n : {1, 3, 129, 300}) {
    const int tokens = n + 37, draws = n + 5;
    std::vector<int32_t> toks(static_cast<size_t>(tokens)), drawn(static_cast<size_t>(draws)), pairs;
    for (auto& t : toks) t = int32_t(rng() % 151552u);
    for (auto& d : drawn) d = int32_t(rng() % 151552u);
    std::vector<int32_t> dst(static_cast<size_t>(tokens));
    std::iota(dst.begin(), dst.end(), 0);
    std::shuffle(dst.begin(), dst.end(), rng);
    for (int i = 0; i < n; ++i) {
      pairs.push_back(dst[size_t(i)]);
      pairs.push_back(int32_t(rng() % uint32_t(draws)));
    }
    std::vector<int32_t> ref = toks;
    take_drawn_tokens_ref(ref, pairs, drawn);
    DeviceBuffer<int32_t> d_toks(toks), d_pairs(pairs), d_drawn(drawn);
    take_drawn_tokens(d_toks.get(), d_pairs.get(), n, d_drawn.get(), nullptr);
    EXPECT_EQ(d_toks.download(), ref) << "n=" << n;
    EXPECT_NE(ref, toks) << "n=" << n;  // the test changes something
  }
}

TEST(CudaRmsNorm, MatchesReferenceWithSpecRounding) {
  std::mt19937 rng(12);
  for (int hidden : {130, 2000, 2048, 8200}) {
    const int rows = 5;
    auto x = random_bf16(rng, size_t(rows) * hidden, 3.f);
    auto w = random_f32(rng, size_t(hidden), 1.f, 0.3f);
    std::vector<bf16> ref;
    rmsnorm_ref(x, w, ref, rows, hidden, 1e-6f);
    DeviceBuffer<bf16> d_x(x), d_out(x.size());
    DeviceBuffer<float> d_w(w);
    d_out.poison();
    rmsnorm(d_x.get(), d_w.get(), d_out.get(), rows, hidden, 1e-6f, nullptr);
    const auto c = compare(d_out.download(), ref, kBf16Rtol, kBf16Atol);
    EXPECT_TRUE(c.ok()) << "hidden=" << hidden << " " << c.describe();
  }
}

TEST(CudaRmsNorm, ResidualAddThenNorm) {
  std::mt19937 rng(13);
  const int rows = 3, hidden = 2048 + 24;
  auto h = random_bf16(rng, size_t(rows) * hidden, 2.f);
  auto delta = random_bf16(rng, h.size(), 0.5f);
  auto w = random_f32(rng, size_t(hidden), 1.f, 0.3f);
  DeviceBuffer<bf16> d_h(h), d_delta(delta), d_out(h.size());
  DeviceBuffer<float> d_w(w);
  d_out.poison();
  add_rmsnorm(d_h.get(), d_delta.get(), d_w.get(), d_out.get(), rows, hidden, 1e-6f, nullptr);
  std::vector<bf16> ref_out;
  add_rmsnorm_ref(h, delta, w, ref_out, rows, hidden, 1e-6f);
  const auto ch = compare(d_h.download(), h, 0.0, 0.0);  // one rounding of an exact sum: bit-exact
  EXPECT_TRUE(ch.ok()) << "residual " << ch.describe();
  const auto co = compare(d_out.download(), ref_out, kBf16Rtol, kBf16Atol);
  EXPECT_TRUE(co.ok()) << "norm " << co.describe();
}

// Steps of more than 8 rows take the warp-per-row kernel (the row in registers, 16-byte accesses,
// the row kernel's summation order rebuilt from lanes and registers); it must give the row
// kernel's bits: the same rows normalised 8 at a time (the row kernel) into their own poisoned
// buffers must match bit for bit, for the plain norm and the residual add in front, and both the
// CPU reference. 37 rows (a last CTA of one row); hidden 2048 (Flint: 8 vectors per lane), 2040
// and 1000 (lanes without a last vector, threads of the row kernel with one element fewer), 520
// (3 trips of 4), 200 and 24 (lanes without any vector), 8200 (above 2048: the row kernel) and 2050
// (not a multiple of 8: the row kernel throughout).
TEST(CudaRmsNorm, WarpRowsMatchRowKernelBitForBit) {
  std::mt19937 rng(16);
  for (int hidden : {2048, 2040, 1000, 520, 200, 24, 8200, 2050, -2048, -520}) {
    // Negative: 4999 rows of |hidden| (more CTAs than one wave holds, a last CTA of 3 rows).
    const int rows = hidden < 0 ? 4999 : 37;
    hidden = std::abs(hidden);
    for (bool add : {false, true}) {
      SCOPED_TRACE("hidden=" + std::to_string(hidden) + " rows=" + std::to_string(rows) + (add ? " add" : ""));
      const auto h = random_bf16(rng, size_t(rows) * hidden, 3.f), delta = random_bf16(rng, h.size(), 0.5f);
      const auto w = random_f32(rng, size_t(hidden), 1.f, 0.3f);
      DeviceBuffer<bf16> d_h0(h), d_h1(h), d_delta(delta), d_out0(h.size()), d_out1(h.size());
      DeviceBuffer<float> d_w(w);
      d_out0.poison();
      d_out1.poison();
      if (add) add_rmsnorm(d_h0.get(), d_delta.get(), d_w.get(), d_out0.get(), rows, hidden, 1e-6f, nullptr);
      else rmsnorm(d_h0.get(), d_w.get(), d_out0.get(), rows, hidden, 1e-6f, nullptr);
      for (int r0 = 0; r0 < rows; r0 += 8) {  // the row kernel, at most 8 rows per call
        const size_t off = size_t(r0) * hidden;
        const int n = std::min(8, rows - r0);
        if (add)
          add_rmsnorm(d_h1.get() + off, d_delta.get() + off, d_w.get(), d_out1.get() + off, n, hidden, 1e-6f, nullptr);
        else
          rmsnorm(d_h1.get() + off, d_w.get(), d_out1.get() + off, n, hidden, 1e-6f, nullptr);
      }
      const auto out0 = d_out0.download(), out1 = d_out1.download(), h0 = d_h0.download(), h1 = d_h1.download();
      size_t differ = 0;
      for (size_t i = 0; i < out0.size(); ++i) differ += out0[i].bits != out1[i].bits || h0[i].bits != h1[i].bits;
      EXPECT_EQ(differ, 0u) << "warp-per-row kernel vs row kernel";
      std::vector<bf16> ref_h = h, ref_out;
      if (add) add_rmsnorm_ref(ref_h, delta, w, ref_out, rows, hidden, 1e-6f);
      else rmsnorm_ref(h, w, ref_out, rows, hidden, 1e-6f);
      const auto c = compare(out0, ref_out, kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(c.ok()) << "norm vs the CPU reference: " << c.describe();
      const auto ch = compare(h0, ref_h, 0.0, 0.0);
      EXPECT_TRUE(ch.ok()) << "h vs the CPU reference: " << ch.describe();
    }
  }
}

}  // namespace
}  // namespace striker::cuda::testing

#include "backends/cuda/elementwise/elementwise.h"

namespace striker::cuda::testing {
namespace {

TEST(CudaElementwise, SwigluResidualAndRandomFill) {
  std::mt19937 rng(14);
  const int64_t n = 100003;
  auto g = random_bf16(rng, size_t(n), 3.f), u = random_bf16(rng, size_t(n));
  std::vector<bf16> ref;
  swiglu_act_ref(g, u, ref);
  DeviceBuffer<bf16> d_g(g), d_u(u), d_a(static_cast<size_t>(n));
  d_a.poison();
  swiglu_act(d_g.get(), d_u.get(), d_a.get(), n, nullptr);
  auto c = compare(d_a.download(), ref, kBf16Rtol, 0.0);
  EXPECT_TRUE(c.ok()) << "swiglu " << c.describe();

  std::vector<float> h_ref(static_cast<size_t>(n));
  for (size_t i = 0; i < h_ref.size(); ++i) h_ref[i] = round_bf16(bf16_to_float(g[i]) + bf16_to_float(u[i]));
  residual_add(d_g.get(), d_u.get(), n, nullptr);
  c = compare(to_float(d_g.download()), h_ref, 0.0, 0.0);
  EXPECT_TRUE(c.ok()) << "residual " << c.describe();

  DeviceBuffer<bf16> d_r(static_cast<size_t>(n));
  d_r.poison();
  fill_random_bf16(d_r.get(), n, 7, 0.5f, 0.1f, nullptr);
  const auto r = to_float(d_r.download());
  double mean = 0, var = 0;
  for (float v : r) mean += v;
  mean /= double(n);
  for (float v : r) var += (v - mean) * (v - mean);
  EXPECT_NEAR(mean, 0.5, 0.005);
  EXPECT_NEAR(std::sqrt(var / double(n)), 0.1, 0.005);  // NaN poison left anywhere would fail both
}

// The 16-byte forms (16-byte aligned pointers, n / 8 vectors, the tail scalar) against the scalar
// kernels (the same data one element off 16-byte alignment), bit for bit, into poisoned outputs.
TEST(CudaElementwise, VectorFormsMatchScalarFormsBitForBit) {
  std::mt19937 rng(15);
  const int64_t n = 8192 * 3 + 5;
  auto g = random_bf16(rng, size_t(n), 3.f), u = random_bf16(rng, size_t(n));
  std::vector<bf16> g1(g), u1(u);  // one leading element: g1.data() + 1 is off 16-byte alignment
  g1.insert(g1.begin(), bf16{}), u1.insert(u1.begin(), bf16{});
  DeviceBuffer<bf16> d_g(g), d_u(u), d_g1(g1), d_u1(u1), d_a{size_t(n)}, d_a1{size_t(n) + 1};
  d_a.poison();
  d_a1.poison();
  swiglu_act(d_g.get(), d_u.get(), d_a.get(), n, nullptr);
  swiglu_act(d_g1.get() + 1, d_u1.get() + 1, d_a1.get() + 1, n, nullptr);
  auto a = d_a.download(), a1 = d_a1.download();
  a1.erase(a1.begin());
  auto c = compare(a, a1, 0.0, 0.0);
  EXPECT_TRUE(c.ok()) << "swiglu vector vs scalar " << c.describe();
  residual_add(d_g.get(), d_u.get(), n, nullptr);
  residual_add(d_g1.get() + 1, d_u1.get() + 1, n, nullptr);
  auto h = d_g.download(), h1 = d_g1.download();
  h1.erase(h1.begin());
  c = compare(h, h1, 0.0, 0.0);
  EXPECT_TRUE(c.ok()) << "residual vector vs scalar " << c.describe();
}

}  // namespace
}  // namespace striker::cuda::testing
