// GEMV (decode) and cuBLASLt GEMM (prefill) against the double-accumulating CPU reference.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cuda/linear/gemm_lt.h"
#include "backends/cuda/linear/gemv.h"
#include "backends/cuda/common/pdl_probe.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {
namespace {

struct Shape {
  int T, in, out;
};

TEST(CudaGemv, StoreResidualAndLogitsMatchReference) {
  std::mt19937 rng(21);
  for (Shape s : {Shape{1, 2048, 1001}, Shape{3, 1000, 37}, Shape{8, 520, 300}, Shape{11, 2048, 77},
                  Shape{1, 512, 2050}, Shape{2, 8200, 33}, Shape{1, 264, 40000}, Shape{3, 2048, 33000}}) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " in=" + std::to_string(s.in) + " out=" + std::to_string(s.out));
    auto x = random_bf16(rng, size_t(s.T) * s.in);
    auto W = random_bf16(rng, size_t(s.out) * s.in, 0.05f);
    std::vector<float> dot;
    gemv_ref(x, s.T, s.in, W, s.out, dot);
    const auto ref = rounded(dot);
    DeviceBuffer<bf16> d_x(x), d_W(W), d_y(size_t(s.T) * s.out);
    d_y.poison();
    gemv_bf16(d_x.get(), s.T, s.in, d_W.get(), s.out, d_y.get(), nullptr);
    auto c = compare(to_float(d_y.download()), ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "store " << c.describe();

    DeviceBuffer<float> d_logits(size_t(s.T) * s.out);
    d_logits.poison();
    gemv_logits(d_x.get(), s.T, s.in, d_W.get(), s.out, d_logits.get(), nullptr);
    c = compare(d_logits.download(), ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "logits " << c.describe();

    auto h = random_bf16(rng, size_t(s.T) * s.out);
    std::vector<float> h_ref(h.size());
    for (size_t i = 0; i < h.size(); ++i) h_ref[i] = round_bf16(bf16_to_float(h[i]) + ref[i]);
    DeviceBuffer<bf16> d_h(h);
    gemv_residual(d_x.get(), s.T, s.in, d_W.get(), s.out, d_h.get(), nullptr);
    c = compare(to_float(d_h.download()), h_ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "residual " << c.describe();
  }
}

TEST(CudaGemv, GateUpSwigluMatchesReference) {
  std::mt19937 rng(22);
  for (Shape s : {Shape{1, 2048, 512}, Shape{5, 264, 77}, Shape{9, 1000, 33}, Shape{2, 2048, 100}}) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " in=" + std::to_string(s.in) + " inter=" + std::to_string(s.out));
    auto x = random_bf16(rng, size_t(s.T) * s.in);
    auto Wg = random_bf16(rng, size_t(s.out) * s.in, 0.05f);
    auto Wu = random_bf16(rng, size_t(s.out) * s.in, 0.05f);
    std::vector<bf16> ref;
    gate_up_ref(x, s.T, s.in, Wg, Wu, s.out, ref);
    DeviceBuffer<bf16> d_x(x), d_g(Wg), d_u(Wu), d_a(ref.size());
    d_a.poison();
    gemv_gate_up(d_x.get(), s.T, s.in, d_g.get(), d_u.get(), s.out, d_a.get(), nullptr);
    const auto c = compare(d_a.download(), ref, 2 * kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << c.describe();
  }
}

// 1..8 tokens through both kernel families (tensor-core skinny kernels from 2 tokens, CUDA-core
// kernels at 1; every width below runs at 1 token too): every split-K width (in = 264 / 520 / 1000 / 2048 / 8200: S = 2, 4, 8, the deep ring;
// 264, 520 and 8200 are not multiples of 32, so a lane's last chunk lies past the row), output
// widths off the 16-row tile, many-CTA grids; poisoned outputs with a poisoned tail that must
// stay untouched; NaN never passes (compare).
TEST(CudaGemv, OneToEightTokensMatchReference) {
  std::mt19937 rng(24);
  std::vector<Shape> shapes;
  const int ins[] = {264, 520, 1000, 2048, 8200, 4096, 2048};
  const int outs[] = {37, 300, 5120 + 9, 1001, 33, 2050, 40000};
  for (int T = 2; T <= 8; ++T) shapes.push_back(Shape{T, ins[T - 2], outs[T - 2]});
  for (int i = 0; i < 7; ++i) shapes.push_back(Shape{1, ins[i], outs[i]});  // the CUDA-core kernels
  shapes.push_back(Shape{8, 96, 17});  // fewer k steps than warps of a tile
  for (Shape s : shapes) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " in=" + std::to_string(s.in) + " out=" + std::to_string(s.out));
    auto x = random_bf16(rng, size_t(s.T) * s.in);
    auto W = random_bf16(rng, size_t(s.out) * s.in, 0.05f);
    std::vector<float> dot;
    gemv_ref(x, s.T, s.in, W, s.out, dot);
    const auto ref = rounded(dot);
    const size_t n = size_t(s.T) * s.out, pad = 64;
    DeviceBuffer<bf16> d_x(x), d_W(W), d_y(n + pad);
    DeviceBuffer<float> d_l(n + pad);
    d_y.poison();
    d_l.poison();
    gemv_bf16(d_x.get(), s.T, s.in, d_W.get(), s.out, d_y.get(), nullptr);
    gemv_logits(d_x.get(), s.T, s.in, d_W.get(), s.out, d_l.get(), nullptr);
    auto y = to_float(d_y.download());
    y.resize(n);
    auto c = compare(y, ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "store " << c.describe();
    auto l = d_l.download();
    l.resize(n);
    c = compare(l, ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "logits " << c.describe();
    EXPECT_TRUE(tail_untouched(d_y, n)) << "store wrote past the output";
    EXPECT_TRUE(tail_untouched(d_l, n)) << "logits wrote past the output";

    auto h = random_bf16(rng, n);
    std::vector<float> h_ref(n);
    for (size_t i = 0; i < n; ++i) h_ref[i] = round_bf16(bf16_to_float(h[i]) + ref[i]);
    DeviceBuffer<bf16> d_h(h);
    gemv_residual(d_x.get(), s.T, s.in, d_W.get(), s.out, d_h.get(), nullptr);
    c = compare(to_float(d_h.download()), h_ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "residual " << c.describe();

    const int inter = s.out % 3000 + 5;  // gate/up: 8-row tiles, widths off the tile too
    auto Wg = random_bf16(rng, size_t(inter) * s.in, 0.05f);
    auto Wu = random_bf16(rng, size_t(inter) * s.in, 0.05f);
    std::vector<bf16> act_ref;
    gate_up_ref(x, s.T, s.in, Wg, Wu, inter, act_ref);
    DeviceBuffer<bf16> d_g(Wg), d_u(Wu), d_a(act_ref.size() + pad);
    d_a.poison();
    gemv_gate_up(d_x.get(), s.T, s.in, d_g.get(), d_u.get(), inter, d_a.get(), nullptr);
    auto a = d_a.download();
    a.resize(act_ref.size());
    c = compare(a, act_ref, 2 * kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "gate/up " << c.describe();
    EXPECT_TRUE(tail_untouched(d_a, act_ref.size())) << "gate/up wrote past the output";
  }
}

// A NaN in one weight row poisons exactly that row's outputs, and a NaN activation exactly its
// token's: the MMA's clamped rows and unused token columns never leak into stored outputs.
TEST(CudaGemv, TwoToEightTokensKeepNaNInItsRowAndToken) {
  std::mt19937 rng(25);
  const int T = 5, in = 1000, out = 45;
  auto x = random_bf16(rng, size_t(T) * in);
  auto W = random_bf16(rng, size_t(out) * in, 0.05f);
  const float nan = std::nanf("");
  W[size_t(7) * in + 13] = float_to_bf16(nan);  // row 7
  x[size_t(3) * in + 600] = float_to_bf16(nan);  // token 3
  DeviceBuffer<bf16> d_x(x), d_W(W), d_y(size_t(T) * out);
  d_y.poison();
  gemv_bf16(d_x.get(), T, in, d_W.get(), out, d_y.get(), nullptr);
  const auto y = to_float(d_y.download());
  for (int t = 0; t < T; ++t)
    for (int o = 0; o < out; ++o)
      EXPECT_EQ(std::isnan(y[size_t(t) * out + o]), o == 7 || t == 3) << "token " << t << " row " << o;
}

// The floor the PDL chain benchmark measures: the empty kernel runs and reports no error.
TEST(CudaPdlProbe, EmptyPdlKernelLaunches) {
  for (int i = 0; i < 20; ++i) launch_empty_pdl(i % 2 ? 132 : 1, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(CudaGemv, RejectsWidthsThatAreNotMultiplesOf8) {
  DeviceBuffer<bf16> x(64), W(64), y(8);
  EXPECT_THROW(gemv_bf16(x.get(), 1, 7, W.get(), 8, y.get(), nullptr), Error);
}

TEST(CudaGemm, CublasLtMatchesReference) {
  std::mt19937 rng(23);
  LtGemm lt;
  for (Shape s : {Shape{37, 264, 300}, Shape{128, 2048, 512}, Shape{1, 520, 40}}) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " in=" + std::to_string(s.in) + " out=" + std::to_string(s.out));
    auto x = random_bf16(rng, size_t(s.T) * s.in);
    auto W = random_bf16(rng, size_t(s.out) * s.in, 0.05f);
    std::vector<float> dot;
    gemv_ref(x, s.T, s.in, W, s.out, dot);
    DeviceBuffer<bf16> d_x(x), d_W(W), d_y(size_t(s.T) * s.out);
    d_y.poison();
    lt.gemm_bf16(d_x.get(), s.T, s.in, d_W.get(), s.out, d_y.get(), nullptr);
    const auto c = compare(to_float(d_y.download()), rounded(dot), kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << c.describe();
  }
}

}  // namespace
}  // namespace striker::cuda::testing
