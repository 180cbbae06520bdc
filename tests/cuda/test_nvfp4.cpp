// NVFP4 (W4A16) kernels against their CPU references (nvfp4_ref.cpp, built on model/nvfp4's
// scalar codec): dequantisation (bit-exact), GEMV store/residual/logits with per-row-range
// scale2, fused gate/up + SwiGLU, selected-experts MoE, and random dummy weights' statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "backends/cuda/linear/gemm_lt.h"
#include "backends/cuda/nvfp4/nvfp4_bf16_bits.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "backends/cuda/nvfp4/nvfp4_moe.h"
#include "backends/cuda/nvfp4/nvfp4_prefill.h"
#include "cuda_test_util.h"
#include "nvfp4_test_util.h"
#include "model/nvfp4.h"
#include "nvfp4_pair_probe.h"

namespace striker::cuda::testing {
namespace {

TEST(CudaNvfp4, DequantizeIsExactForEveryScaleByte) {
  std::mt19937 rng(61);
  const int64_t rows = 37;
  const int in = 576;  // 36 scale bytes per row: rows x 36 > 256 covers every scale byte below
  auto m = random_nvfp4(rng, rows, in);
  for (size_t i = 0; i < m.scales.size(); ++i) m.scales[i] = uint8_t(i & 0xFF);  // incl. 0, subnormals, 0x7F, bit 7
  const auto ref = nvfp4_dequantize_ref(m, rows, in);
  DeviceNvfp4Matrix d(m);
  DeviceBuffer<bf16> out(size_t(rows) * in);
  out.poison();
  nvfp4_dequantize(d.view(), rows, in, out.get(), nullptr);
  const auto got = to_float(out.download());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    // Exact: the reference product must already be a bf16 value and the kernel must produce it.
    const bool ok = !std::isnan(got[i]) && got[i] == ref[i] && round_bf16(ref[i]) == ref[i];
    if (!ok && bad++ == 0) first = i;
  }
  EXPECT_EQ(bad, 0u) << "first mismatch at " << first << ": got " << got[first] << " want " << ref[first];
}

// The tensor-core kernels' decode (nvfp4_pair_bf16) on the device for every code byte under every
// scale byte: the same bits as the host form, which test_cuda_host checks against the codec (E2M1·E4M3
// times 2^-8). The E2M1 0.5 pattern is a bf16 subnormal: a multiply that flushed it would fail here.
TEST(CudaNvfp4, PairDecodeMatchesHostOnEveryByteAndScale) {
  DeviceBuffer<uint32_t> out(size_t(256) * 256 * 4);
  out.poison();
  nvfp4_pair_probe(out.get());
  const auto got = out.download();
  size_t bad = 0;
  for (uint32_t b = 0; b < 256; ++b)
    for (uint32_t v = 0; v < 256; ++v) {
      const uint32_t w = v * 0x01010101u, sc = ue4m3_bf16x2_x2p118_bits(b);
      const uint32_t want[4] = {nvfp4_pair_bf16<0>(w, sc), nvfp4_pair_bf16<1>(w, sc), nvfp4_pair_bf16<2>(w, sc),
                                nvfp4_pair_bf16<3>(w, sc)};
      for (int k = 0; k < 4; ++k) {
        const uint32_t g = got[(size_t(b) * 256 + v) * 4 + size_t(k)];
        if (g != want[k] && bad++ < 5)
          ADD_FAILURE() << std::hex << "scale byte 0x" << b << " code byte 0x" << v << " pair " << k << ": device 0x"
                        << g << " host 0x" << want[k];
      }
    }
  EXPECT_EQ(bad, 0u);
}

// The two-byte scale decode (ue4m3x2_bf16x2_x2p118_bits) on the device for every pair of bytes, with
// junk in the word's upper half: the host form's bits (which test_cuda_host ties to the one-byte form).
// An E4M3 subnormal is a bf16 subnormal before its first multiply: a multiply that flushed it fails.
TEST(CudaNvfp4, ScalePairDecodeMatchesHostOnEveryWord) {
  DeviceBuffer<uint32_t> out(size_t(2) * 0x10000);
  out.poison();
  nvfp4_scale_pair_probe(out.get());
  const auto got = out.download();
  size_t bad = 0;
  for (uint32_t s = 0; s < 0x10000u; ++s) {
    uint32_t want[2];
    ue4m3x2_bf16x2_x2p118_bits(s | 0xA5A50000u, want[0], want[1]);
    for (int h = 0; h < 2; ++h)
      if (got[2 * s + h] != want[h] && bad++ < 5)
        ADD_FAILURE() << std::hex << "scale word 0x" << s << " half " << h << ": device 0x" << got[2 * s + h]
                      << " host 0x" << want[h];
  }
  EXPECT_EQ(bad, 0u);
}

// Scales reach the device canonical (nvfp4_scales.h): 0x7F as 0x00, every other byte as it is, at any
// offset and length (the loader uploads one expert's rows at a time into a stacked buffer).
TEST(CudaNvfp4, UploadedScalesAreCanonical) {
  std::vector<uint8_t> host(1000 + 7);
  for (size_t i = 0; i < host.size(); ++i) host[i] = uint8_t((i * 131 + 5) & 0xFF);
  DeviceBuffer<uint8_t> d(host.size() + 16);
  d.poison();
  nvfp4_upload_scales(d.get() + 3, host.data(), host.size());
  auto got = d.download();
  size_t sevens = 0;
  for (size_t i = 0; i < host.size(); ++i) {
    ASSERT_EQ(got[i + 3], host[i] == 0x7F ? 0 : host[i]) << "byte " << i;
    sevens += host[i] == 0x7F;
  }
  EXPECT_GT(sevens, 0u);
  for (size_t i : {size_t(0), size_t(1), size_t(2), host.size() + 3, got.size() - 1})
    EXPECT_EQ(got[i], 0xFF) << "outside the upload, byte " << i;
  // In place, on a buffer already on the device.
  std::vector<uint8_t> all(256);
  for (int b = 0; b < 256; ++b) all[size_t(b)] = uint8_t(b);
  DeviceBuffer<uint8_t> a(all);
  nvfp4_canonicalize_scales(a.get() + 1, 255, nullptr);
  got = a.download();
  for (int b = 0; b < 256; ++b) EXPECT_EQ(got[size_t(b)], b == 0x7F ? 0 : b) << "byte " << b;
}

struct Shape {
  int T, in, out;
};

TEST(CudaNvfp4, GemvStoreResidualAndLogitsMatchReference) {
  std::mt19937 rng(62);
  for (Shape s : {Shape{1, 2048, 1001}, Shape{3, 1024, 37}, Shape{8, 576, 300}, Shape{11, 2048, 77},
                  Shape{1, 512, 2050}, Shape{2, 8192, 33}, Shape{1, 256, 40000}, Shape{5, 4096, 2048},
                  Shape{1, 4096, 2050}}) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " in=" + std::to_string(s.in) + " out=" + std::to_string(s.out));
    auto x = random_bf16(rng, size_t(s.T) * s.in);
    auto W = random_nvfp4(rng, s.out, s.in);
    // Three row ranges with their own scale2 (q|k|v), boundaries not multiples of any tile.
    RowScale2 s2{s.out / 3, s.out / 3 + s.out / 5 + 1, {0.0137f, 0.0021f, 0.0433f}};
    std::vector<float> dot;
    nvfp4_gemv_ref(x, s.T, s.in, W, s2, s.out, dot);
    const auto ref = rounded(dot);
    DeviceNvfp4Matrix dW(W);
    DeviceBuffer<bf16> d_x(x), d_y(size_t(s.T) * s.out);
    d_y.poison();
    nvfp4_gemv(d_x.get(), s.T, s.in, dW.view(), s2, s.out, d_y.get(), nullptr);
    auto c = compare(to_float(d_y.download()), ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "store " << c.describe();

    DeviceBuffer<float> d_logits(size_t(s.T) * s.out);
    d_logits.poison();
    nvfp4_gemv_logits(d_x.get(), s.T, s.in, dW.view(), s2, s.out, d_logits.get(), nullptr);
    c = compare(d_logits.download(), ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "logits " << c.describe();

    auto h = random_bf16(rng, size_t(s.T) * s.out);
    std::vector<float> h_ref(h.size());
    for (size_t i = 0; i < h.size(); ++i) h_ref[i] = round_bf16(bf16_to_float(h[i]) + ref[i]);
    DeviceBuffer<bf16> d_h(h);
    nvfp4_gemv_residual(d_x.get(), s.T, s.in, dW.view(), s2, s.out, d_h.get(), nullptr);
    c = compare(to_float(d_h.download()), h_ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "residual " << c.describe();
  }
}

TEST(CudaNvfp4, GateUpSwigluMatchesReference) {
  std::mt19937 rng(63);
  for (Shape s : {Shape{1, 2048, 512}, Shape{5, 256, 77}, Shape{9, 1024, 33}, Shape{2, 2048, 100}}) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " in=" + std::to_string(s.in) + " inter=" + std::to_string(s.out));
    auto x = random_bf16(rng, size_t(s.T) * s.in);
    auto Wg = random_nvfp4(rng, s.out, s.in), Wu = random_nvfp4(rng, s.out, s.in);
    const float s2g = 0.011f, s2u = 0.0047f;
    std::vector<bf16> ref;
    nvfp4_gate_up_ref(x, s.T, s.in, Wg, s2g, Wu, s2u, s.out, ref);
    DeviceNvfp4Matrix dg(Wg), du(Wu);
    DeviceBuffer<bf16> d_x(x), d_a(ref.size());
    d_a.poison();
    nvfp4_gemv_gate_up(d_x.get(), s.T, s.in, dg.view(), s2g, du.view(), s2u, s.out, d_a.get(), nullptr);
    const auto c = compare(d_a.download(), ref, 2 * kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << c.describe();
  }
}

// The GEMV kernels (weights loaded before the PDL wait) on decode shapes: T = 1..8, LM-head-like
// row counts (out >= 16384, not multiples of the tile), split and unsplit grids.
TEST(CudaNvfp4, GemvMatchesReferenceOnDecodeShapes) {
  std::mt19937 rng(66);
  std::vector<Shape> shapes = {Shape{1, 2048, 16385}, Shape{1, 1024, 20001}, Shape{1, 576, 16384},
                               Shape{1, 2048, 5120},  Shape{1, 4096, 2050},  Shape{1, 8192, 33},
                               Shape{1, 64, 300}};
  for (int T = 2; T <= 8; ++T) shapes.push_back(Shape{T, T % 2 ? 2048 : 4096, 1000 + 37 * T});
  for (Shape s : shapes) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " in=" + std::to_string(s.in) + " out=" + std::to_string(s.out));
    auto x = random_bf16(rng, size_t(s.T) * s.in);
    auto W = random_nvfp4(rng, s.out, s.in, 0x01, 0x45);  // includes subnormal scale bytes
    RowScale2 s2{s.out / 3, s.out / 3 + s.out / 5 + 1, {0.0137f, 0.0021f, 0.0433f}};
    std::vector<float> dot;
    nvfp4_gemv_ref(x, s.T, s.in, W, s2, s.out, dot);
    const auto ref = rounded(dot);
    const auto h0 = random_bf16(rng, size_t(s.T) * s.out);
    std::vector<float> h_ref(h0.size());
    for (size_t i = 0; i < h0.size(); ++i) h_ref[i] = round_bf16(bf16_to_float(h0[i]) + ref[i]);
    DeviceNvfp4Matrix dW(W);
    DeviceBuffer<bf16> d_x(x), d_y(size_t(s.T) * s.out), d_h(h0);
    DeviceBuffer<float> d_l(size_t(s.T) * s.out);
    d_y.poison();
    d_l.poison();
    nvfp4_gemv(d_x.get(), s.T, s.in, dW.view(), s2, s.out, d_y.get(), nullptr);
    nvfp4_gemv_logits(d_x.get(), s.T, s.in, dW.view(), s2, s.out, d_l.get(), nullptr);
    nvfp4_gemv_residual(d_x.get(), s.T, s.in, dW.view(), s2, s.out, d_h.get(), nullptr);
    auto c = compare(to_float(d_y.download()), ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "store vs reference: " << c.describe();
    c = compare(d_l.download(), ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "logits vs reference: " << c.describe();
    c = compare(to_float(d_h.download()), h_ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "residual vs reference: " << c.describe();
  }
}

// Dense gate/up + SwiGLU on more decode shapes (T = 1..8, inter not a multiple of the tile).
TEST(CudaNvfp4, GateUpMatchesReferenceOnDecodeShapes) {
  std::mt19937 rng(67);
  for (Shape s : {Shape{1, 2048, 512}, Shape{1, 2048, 6144}, Shape{3, 1024, 77}, Shape{8, 2048, 100},
                  Shape{5, 64, 33}}) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " in=" + std::to_string(s.in) + " inter=" + std::to_string(s.out));
    auto x = random_bf16(rng, size_t(s.T) * s.in);
    auto Wg = random_nvfp4(rng, s.out, s.in), Wu = random_nvfp4(rng, s.out, s.in);
    const float s2g = 0.011f, s2u = 0.0047f;
    std::vector<bf16> ref;
    nvfp4_gate_up_ref(x, s.T, s.in, Wg, s2g, Wu, s2u, s.out, ref);
    DeviceNvfp4Matrix dg(Wg), du(Wu);
    DeviceBuffer<bf16> d_x(x), d_a(ref.size());
    d_a.poison();
    nvfp4_gemv_gate_up(d_x.get(), s.T, s.in, dg.view(), s2g, du.view(), s2u, s.out, d_a.get(), nullptr);
    const auto c = compare(d_a.download(), ref, 2 * kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "gate/up vs reference: " << c.describe();
  }
}

// 1..8 tokens, and 9..64 in groups of 8, through both kernel families (tensor-core skinny kernels from 2
// tokens, CUDA-core kernels at 1; every width below runs at 1 token too): every split-K width (in = 64 / 192 / 576 / 1024 / 2048 / 4096 / 8192: a lane's last
// chunk past the row for 64, 192, 576), outputs off the 16-row tile, three scale2 ranges, subnormal
// scale bytes and, in one shape, every scale byte (0x7F decodes as 0, 0xFF as 480); poisoned
// outputs whose poisoned tail must stay untouched.
TEST(CudaNvfp4, OneToSixtyFourTokensMatchReference) {
  std::mt19937 rng(68);
  std::vector<Shape> shapes;
  const int ins[] = {64, 192, 576, 1024, 2048, 4096, 8192};
  const int outs[] = {17, 300, 5129, 1001, 77, 2050, 16500};
  for (int T = 2; T <= 8; ++T) shapes.push_back(Shape{T, ins[T - 2], outs[T - 2]});
  for (int i = 0; i < 7; ++i) shapes.push_back(Shape{1, ins[i], outs[i]});  // the CUDA-core kernels
  // Several groups of 8 tokens (grid.y), the last one partial: the skinny kernels above 8 tokens.
  for (const Shape s : {Shape{9, 576, 300}, Shape{17, 2048, 1001}, Shape{40, 1024, 77}, Shape{64, 4096, 2050}})
    shapes.push_back(s);
  for (size_t k = 0; k < shapes.size(); ++k) {
    const Shape s = shapes[k];
    SCOPED_TRACE("T=" + std::to_string(s.T) + " in=" + std::to_string(s.in) + " out=" + std::to_string(s.out));
    auto x = random_bf16(rng, size_t(s.T) * s.in);
    const bool all_scales = k == 1 || k == 8;  // one shape per family
    auto W = random_nvfp4(rng, s.out, s.in, all_scales ? 0x00 : 0x01, all_scales ? 0xFF : 0x45);
    RowScale2 s2{s.out / 3, s.out / 3 + s.out / 5 + 1, {0.0137f, 0.0021f, 0.0433f}};
    std::vector<float> dot;
    nvfp4_gemv_ref(x, s.T, s.in, W, s2, s.out, dot);
    const auto ref = rounded(dot);
    const size_t n = size_t(s.T) * s.out, pad = 64;
    DeviceNvfp4Matrix dW(W);
    DeviceBuffer<bf16> d_x(x), d_y(n + pad);
    DeviceBuffer<float> d_l(n + pad);
    d_y.poison();
    d_l.poison();
    nvfp4_gemv(d_x.get(), s.T, s.in, dW.view(), s2, s.out, d_y.get(), nullptr);
    nvfp4_gemv_logits(d_x.get(), s.T, s.in, dW.view(), s2, s.out, d_l.get(), nullptr);
    EXPECT_TRUE(tail_untouched(d_y, n)) << "store wrote past the output";
    EXPECT_TRUE(tail_untouched(d_l, n)) << "logits wrote past the output";
    auto yb = d_y.download();
    auto lb = d_l.download();
    yb.resize(n);
    lb.resize(n);
    auto c = compare(to_float(yb), ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "store " << c.describe();
    c = compare(lb, ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "logits " << c.describe();

    auto h = random_bf16(rng, n);
    std::vector<float> h_ref(n);
    for (size_t i = 0; i < n; ++i) h_ref[i] = round_bf16(bf16_to_float(h[i]) + ref[i]);
    DeviceBuffer<bf16> d_h(h);
    nvfp4_gemv_residual(d_x.get(), s.T, s.in, dW.view(), s2, s.out, d_h.get(), nullptr);
    c = compare(to_float(d_h.download()), h_ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "residual " << c.describe();

    const int inter = s.out % 3000 + 5;  // gate/up: 8-row tiles, widths off the tile too
    auto Wg = random_nvfp4(rng, inter, s.in, 0x01, 0x45), Wu = random_nvfp4(rng, inter, s.in, 0x01, 0x45);
    const float s2g = 0.011f, s2u = 0.0047f;
    std::vector<bf16> act_ref;
    nvfp4_gate_up_ref(x, s.T, s.in, Wg, s2g, Wu, s2u, inter, act_ref);
    DeviceNvfp4Matrix dg(Wg), du(Wu);
    DeviceBuffer<bf16> d_a(act_ref.size() + pad);
    d_a.poison();
    nvfp4_gemv_gate_up(d_x.get(), s.T, s.in, dg.view(), s2g, du.view(), s2u, inter, d_a.get(),
                             nullptr);
    EXPECT_TRUE(tail_untouched(d_a, act_ref.size())) << "gate/up wrote past the output";
    auto a = d_a.download();
    a.resize(act_ref.size());
    c = compare(a, act_ref, 2 * kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << "gate/up " << c.describe();
  }
}

// Prefill projection: dequantise + cuBLASLt with alpha = scale2, in row chunks of a small
// scratch (chunks end at the scale2 boundaries too), writing a column block of a wider output.
// From kNvfp4SkinnyTwoGroupsMinTokens tokens a CTA feeds each decoded fragment to two groups of 8
// tokens' MMAs; an MMA column does not depend on the others, so every group of 8 must have the bits of
// the same 8 tokens run alone (one group per CTA, T = 8). T = 24 / 40 leave the last CTA's second group
// past T (computed, never stored); the gate/up pair and the residual take the same kernel.
// grid.y of the one kernel an NVFP4 GEMV of T tokens launches (captured into a graph, not run).
unsigned gemv_grid_y(int T, int in, int out) {
  std::mt19937 rng(70);
  const auto W = random_nvfp4(rng, out, in);
  DeviceNvfp4Matrix dW(W);
  DeviceBuffer<bf16> x(size_t(T) * in), y(size_t(T) * out);
  cudaStream_t s = nullptr;
  STRIKER_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  nvfp4_gemv(x.get(), T, in, dW.view(), RowScale2::uniform(1.f), out, y.get(), s);  // attributes set outside the capture
  STRIKER_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t g = nullptr;
  STRIKER_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  nvfp4_gemv(x.get(), T, in, dW.view(), RowScale2::uniform(1.f), out, y.get(), s);
  STRIKER_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  size_t n = 1;
  cudaGraphNode_t node = nullptr;
  STRIKER_CUDA_CHECK(cudaGraphGetNodes(g, &node, &n));
  cudaKernelNodeParams params{};
  STRIKER_CUDA_CHECK(cudaGraphKernelNodeGetParams(node, &params));
  STRIKER_CUDA_CHECK(cudaGraphDestroy(g));
  STRIKER_CUDA_CHECK(cudaStreamDestroy(s));
  return params.gridDim.y;
}

TEST(CudaNvfp4, TwoTokenGroupsPerCtaKeepEachGroupsBits) {
  std::mt19937 rng(69);
  for (const Shape s : {Shape{24, 2048, 1001}, Shape{40, 576, 300}, Shape{64, 4096, 2050}}) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " in=" + std::to_string(s.in) + " out=" + std::to_string(s.out));
    ASSERT_GE(s.T, kNvfp4SkinnyTwoGroupsMinTokens);
    // The launch really takes 16 tokens per CTA (else the bit comparison below holds trivially).
    EXPECT_EQ(gemv_grid_y(s.T, s.in, s.out), unsigned((s.T + 15) / 16)) << "two token groups per CTA";
    const auto x = random_bf16(rng, size_t(s.T) * s.in);
    const auto W = random_nvfp4(rng, s.out, s.in, 0x01, 0x45);
    const RowScale2 s2{s.out / 3, s.out / 2, {0.0137f, 0.0021f, 0.0433f}};
    const int inter = s.out % 3000 + 5;
    const auto Wg = random_nvfp4(rng, inter, s.in, 0x01, 0x45), Wu = random_nvfp4(rng, inter, s.in, 0x01, 0x45);
    DeviceNvfp4Matrix dW(W), dg(Wg), du(Wu);
    DeviceBuffer<bf16> d_x(x), d_y(size_t(s.T) * s.out), d_a(size_t(s.T) * inter);
    d_y.poison();
    d_a.poison();
    nvfp4_gemv(d_x.get(), s.T, s.in, dW.view(), s2, s.out, d_y.get(), nullptr);
    nvfp4_gemv_gate_up(d_x.get(), s.T, s.in, dg.view(), 0.011f, du.view(), 0.0047f, inter, d_a.get(), nullptr);
    const auto y = d_y.download(), a = d_a.download();
    for (int t0 = 0; t0 < s.T; t0 += 8) {
      const std::vector<bf16> x8(x.begin() + int64_t(t0) * s.in, x.begin() + int64_t(t0 + 8) * s.in);
      DeviceBuffer<bf16> d_x8(x8), d_y8(size_t(8) * s.out), d_a8(size_t(8) * inter);
      nvfp4_gemv(d_x8.get(), 8, s.in, dW.view(), s2, s.out, d_y8.get(), nullptr);
      nvfp4_gemv_gate_up(d_x8.get(), 8, s.in, dg.view(), 0.011f, du.view(), 0.0047f, inter, d_a8.get(), nullptr);
      const auto y8 = d_y8.download(), a8 = d_a8.download();
      EXPECT_EQ(0, std::memcmp(y8.data(), y.data() + int64_t(t0) * s.out, y8.size() * sizeof(bf16)))
          << "gemv tokens " << t0 << ".." << t0 + 7;
      EXPECT_EQ(0, std::memcmp(a8.data(), a.data() + int64_t(t0) * inter, a8.size() * sizeof(bf16)))
          << "gate/up tokens " << t0 << ".." << t0 + 7;
    }
  }
}

// Below kNvfp4SkinnyTwoGroupsMinTokens only launches whose one-group grid has at least
// kNvfp4SkinnyWideGridMinCtas CTAs (the LM head) take two groups per CTA; each group keeps the bits of
// its tokens run alone (>= 2 of them: one token takes the one-token kernel), and narrow launches keep one.
TEST(CudaNvfp4, WideGridsTakeTwoTokenGroupsFromNineTokens) {
  std::mt19937 rng(71);
  const int in = 256, wide = 128 * kNvfp4SkinnyWideGridMinCtas + 37;  // 2 steps: 8 tiles of 16 rows per CTA
  EXPECT_EQ(gemv_grid_y(10, 2048, 1001), 2u) << "a narrow grid keeps one token group per CTA";
  const auto W = random_nvfp4(rng, wide, in, 0x01, 0x45);
  DeviceNvfp4Matrix dW(W);
  const RowScale2 s2{wide / 3, wide / 2, {0.0137f, 0.0021f, 0.0433f}};
  for (int T : {10, 16}) {
    SCOPED_TRACE("T=" + std::to_string(T));
    EXPECT_EQ(gemv_grid_y(T, in, wide), unsigned((T + 15) / 16)) << "two token groups per CTA";
    const auto x = random_bf16(rng, size_t(T) * in);
    DeviceBuffer<bf16> d_x(x), d_y(size_t(T) * wide);
    d_y.poison();
    nvfp4_gemv(d_x.get(), T, in, dW.view(), s2, wide, d_y.get(), nullptr);
    const auto y = d_y.download();
    for (int t0 = 0; t0 < T; t0 += 8) {
      const int n = std::min(8, T - t0);
      const std::vector<bf16> xn(x.begin() + int64_t(t0) * in, x.begin() + int64_t(t0 + n) * in);
      DeviceBuffer<bf16> d_xn(xn), d_yn(size_t(n) * wide);
      d_yn.poison();
      nvfp4_gemv(d_xn.get(), n, in, dW.view(), s2, wide, d_yn.get(), nullptr);
      const auto yn = d_yn.download();
      size_t nan = 0;
      for (const bf16 v : yn) nan += std::isnan(bf16_to_float(v));
      EXPECT_EQ(nan, 0u);
      EXPECT_EQ(0, std::memcmp(yn.data(), y.data() + int64_t(t0) * wide, yn.size() * sizeof(bf16)))
          << "tokens " << t0 << ".." << t0 + n - 1;
    }
  }
}

TEST(CudaNvfp4, PrefillGemmMatchesReference) {
  std::mt19937 rng(65);
  LtGemm lt;
  struct Case {
    int T, in, out, ld;
    int64_t scratch;
  };
  for (Case s : {Case{37, 256, 320, 320, 1 << 20}, Case{9, 512, 1000, 1000, 512 * 64},
                 Case{130, 1024, 520, 600, 1024 * 24}, Case{17, 2048, 77, 77, 2048 * 8}}) {
    SCOPED_TRACE("T=" + std::to_string(s.T) + " in=" + std::to_string(s.in) + " out=" + std::to_string(s.out) +
                 " ld=" + std::to_string(s.ld) + " scratch=" + std::to_string(s.scratch));
    auto x = random_bf16(rng, size_t(s.T) * s.in);
    auto W = random_nvfp4(rng, s.out, s.in, 0x01, 0x45);  // includes subnormal scale bytes
    const RowScale2 s2{s.out / 3 / 8 * 8, 2 * s.out / 3 / 8 * 8, {0.0137f, 0.0021f, 0.0433f}};  // multiples of 8
    std::vector<float> dot;
    nvfp4_gemv_ref(x, s.T, s.in, W, s2, s.out, dot);
    std::vector<float> ref(size_t(s.T) * s.ld, std::nanf(""));  // columns past `out` stay poisoned
    for (int t = 0; t < s.T; ++t)
      for (int o = 0; o < s.out; ++o) ref[size_t(t) * s.ld + o] = round_bf16(dot[size_t(t) * s.out + o]);
    DeviceNvfp4Matrix dW(W);
    DeviceBuffer<bf16> d_x(x), d_y(size_t(s.T) * s.ld), d_scratch(size_t(s.scratch));
    d_y.poison();
    nvfp4_gemm(lt, d_x.get(), s.T, s.in, dW.view(), s2, s.out, d_y.get(), s.ld, {d_scratch.get(), s.scratch}, nullptr);
    const auto c = compare(to_float(d_y.download()), ref, kBf16Rtol, 1e-3);
    EXPECT_TRUE(c.ok()) << c.describe();
  }
}

TEST(CudaNvfp4, RejectsWidthsThatAreNotMultiplesOf64) {
  DeviceBuffer<bf16> x(128), y(8);
  DeviceBuffer<uint8_t> codes(512), scales(64);
  EXPECT_THROW(nvfp4_gemv(x.get(), 1, 96, {codes.get(), scales.get()}, RowScale2::uniform(1.f), 4, y.get(), nullptr),
               Error);
  EXPECT_THROW(nvfp4_dequantize({codes.get(), scales.get()}, 1, 32, y.get(), nullptr), Error);
}

struct MoeDims {
  int I, Is;
};

// The selected-experts MoE (gate/up, down, combine) of T in `Ts` tokens at hidden width H against
// moe_float_ref, for each (I, Is) of `dims` and each way of giving the shared expert.
void expect_selected_experts_moe_matches_reference(std::mt19937& rng, int H, std::initializer_list<MoeDims> dims_list,
                                                   std::initializer_list<int> Ts) {
  const int E = 16, K = 6;
  for (MoeDims dims : dims_list)
  for (int T : Ts) {
    const int I = dims.I, Is = dims.Is;
    for (int shared_mode : {0, 1, 2}) {  // 0: NVFP4 shared fused, 1: precomputed bf16 y_shared, 2: none
      SCOPED_TRACE("H=" + std::to_string(H) + " I=" + std::to_string(I) + " Is=" + std::to_string(Is) +
                   " T=" + std::to_string(T) + " shared_mode=" + std::to_string(shared_mode));
      auto x = random_bf16(rng, size_t(T) * H);
      auto g = random_nvfp4(rng, int64_t(E) * I, H), u = random_nvfp4(rng, int64_t(E) * I, H);
      auto d = random_nvfp4(rng, int64_t(E) * H, I);
      auto sg = random_nvfp4(rng, Is, H), su = random_nvfp4(rng, Is, H), sdn = random_nvfp4(rng, H, Is);
      std::vector<float> s2g(E), s2u(E), s2d(E);
      std::uniform_real_distribution<float> us(0.002f, 0.02f);
      for (int e = 0; e < E; ++e) s2g[size_t(e)] = us(rng), s2u[size_t(e)] = us(rng), s2d[size_t(e)] = us(rng) * 0.5f;
      const float sh_s2g = 0.009f, sh_s2u = 0.013f, sh_s2d = 0.004f;
      std::vector<int32_t> ids;
      std::vector<float> tw;
      random_topk(rng, T, K, E, ids, tw);
      const auto fg = scaled_floats(g, int64_t(E) * I, H, s2g, int64_t(I) * H);
      const auto fu = scaled_floats(u, int64_t(E) * I, H, s2u, int64_t(I) * H);
      const auto fd = scaled_floats(d, int64_t(E) * H, I, s2d, int64_t(H) * I);
      const auto fsg = scaled_floats(sg, Is, H, {sh_s2g}, int64_t(Is) * H);
      const auto fsu = scaled_floats(su, Is, H, {sh_s2u}, int64_t(Is) * H);
      const auto fsd = scaled_floats(sdn, H, Is, {sh_s2d}, int64_t(H) * Is);
      auto h = random_bf16(rng, size_t(T) * H);
      std::vector<bf16> h_ref = h;
      const bool with_shared = shared_mode != 2;
      moe_float_ref(x, T, H, I, Is,
                    MoeFloatWeights{&fg, &fu, &fd, with_shared ? &fsg : nullptr, &fsu, &fsd}, ids, tw, K, h_ref);

      DeviceNvfp4Matrix dg(g), du(u), dd(d), dsg(sg), dsu(su), dsd(sdn);
      DeviceBuffer<float> d_s2g(s2g), d_s2u(s2u), d_s2d(s2d), d_tw(tw);
      DeviceBuffer<int32_t> d_ids(ids);
      DeviceBuffer<bf16> d_x(x), d_h(h), d_act(size_t(T) * K * I), d_sact(size_t(T) * Is);
      DeviceBuffer<bf16> d_y(size_t(T) * (K + 1) * H);  // each slot's down rows (T >= 2, I <= 512)
      d_act.poison();
      d_sact.poison();
      d_y.poison();
      const Nvfp4Shared sh{dsg.view(), dsu.view(), dsd.view(), sh_s2g, sh_s2u, sh_s2d, Is};
      const Nvfp4Stack sg_stack{dg.view(), d_s2g.get()}, su_stack{du.view(), d_s2u.get()},
          sd_stack{dd.view(), d_s2d.get()};
      // Mode 1: the shared expert's output as a bf16 vector, computed by the host reference
      // (stands for a BF16 shared expert run by the BF16 kernels).
      DeviceBuffer<bf16> d_ysh;
      if (shared_mode == 1) {
        std::vector<bf16> ysh(size_t(T) * H), zero(size_t(T) * H, float_to_bf16(0.f));
        std::vector<bf16> hz = zero;
        moe_float_ref(x, T, H, I, Is, MoeFloatWeights{&fg, &fu, &fd, &fsg, &fsu, &fsd}, std::vector<int32_t>(), {}, 0,
                      hz);  // K = 0: h = bf16(0 + bf16(0 + shared)) = shared output
        d_ysh = DeviceBuffer<bf16>(hz);
      }
      const Nvfp4Matrix down_rows = dd.view();  // the L2 prefetch of the down rows (the backend's form) at T != 3
      nvfp4_moe_gate_up(d_x.get(), T, H, sg_stack, su_stack, I, d_ids.get(), K, d_act.get(),
                        shared_mode == 0 ? &sh : nullptr, shared_mode == 0 ? d_sact.get() : nullptr, nullptr,
                        T != 3 ? &down_rows : nullptr);
      nvfp4_moe_down_combine(d_act.get(), T, K, sd_stack, I, H, d_ids.get(), d_tw.get(),
                             shared_mode == 0 ? &sh : nullptr, shared_mode == 0 ? d_sact.get() : nullptr,
                             shared_mode == 1 ? d_ysh.get() : nullptr, d_h.get(), nullptr, d_y.get());
      const auto c = compare(d_h.download(), h_ref, 2 * kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(c.ok()) << c.describe();
    }
  }
}

TEST(CudaNvfp4, SelectedExpertsMoeMatchesReference) {
  std::mt19937 rng(64);
  // I = 512 (16 chunks) is the widest the half-warp MoE down takes; I = 576 takes the two-row kernel.
  // I = Is = 512 is also the down kernels' all-live form (nvfp4_moe_mma.cu kFull).
  expect_selected_experts_moe_matches_reference(rng, 320, {{192, 128}, {512, 512}, {576, 128}}, {1, 3, 8});
}

// Hidden widths of whole kilobytes of chunks: Flint's 2048 (one pair of chunks per lane: the gate/up's
// kOnePair form, nvfp4_one_pair_per_lane) and, in the general form, one chunk per lane (1024: the pair's
// second chunk is past the row for every lane), three (3072: the loop refills the first chunk only) and
// four (4096: it refills both).
TEST(CudaNvfp4, SelectedExpertsMoeMatchesReferenceAtWholeKilobyteWidths) {
  std::mt19937 rng(66);
  for (int H : {1024, 2048, 3072, 4096}) expect_selected_experts_moe_matches_reference(rng, H, {{512, 512}}, {1, 3, 8});
}

// A T-token MoE step (the slot kernels and the combine) gives each token the routed experts' bits of
// a one-token step (the one-token down kernel: the tensor-core sums run the same warp computation per
// slot). The shared expert: below kNvfp4MoeSharedSkinnyMinTokens one slot per token, the one-token bits
// too; from there the bits of the dense skinny GEMMs of all T tokens (nvfp4_gemv_gate_up, then
// nvfp4_gemv of its output), its tiles one grid row per 8 tokens (nvfp4_moe_shared_skinny). With the
// shared expert per token slot at 3+ tokens (session 35's main) the shared part would have the
// one-token bits and this test would fail.
TEST(CudaNvfp4, SelectedExpertsMoeOfTTokensHasOneTokenRoutedBitsAndSkinnySharedBits) {
  std::mt19937 rng(65);
  const int E = 16, H = 2048, I = 512, K = 6;
  const float s2g = 0.009f, s2u = 0.013f, s2d = 0.004f;
  auto g = random_nvfp4(rng, int64_t(E) * I, H), u = random_nvfp4(rng, int64_t(E) * I, H);
  auto d = random_nvfp4(rng, int64_t(E) * H, I);
  auto sg = random_nvfp4(rng, I, H), su = random_nvfp4(rng, I, H), sdn = random_nvfp4(rng, H, I);
  DeviceNvfp4Matrix dg(g), du(u), dd(d), dsg(sg), dsu(su), dsd(sdn);
  std::vector<float> s2(E, 0.01f);
  DeviceBuffer<float> d_s2(s2);
  const Nvfp4Shared sh{dsg.view(), dsu.view(), dsd.view(), s2g, s2u, s2d, I};
  const Nvfp4Stack gs{dg.view(), d_s2.get()}, us{du.view(), d_s2.get()}, ds{dd.view(), d_s2.get()};
  for (int T : {2, 3, 5, 8, 13, 28}) {
    SCOPED_TRACE("T=" + std::to_string(T));
    const bool skinny = T >= kNvfp4MoeSharedSkinnyMinTokens;
    auto x = random_bf16(rng, size_t(T) * H), h0 = random_bf16(rng, size_t(T) * H);
    std::vector<float> tw;
    std::vector<int32_t> ids;
    random_topk(rng, T, K, E, ids, tw);
    // tokens t0..t0+n-1 as one step of n tokens; y_shared: the shared expert's output given as a
    // bf16 vector (then the step runs the routed experts only), else the shared expert fused.
    auto run = [&](int t0, int n, const bf16* y_shared) {
      DeviceBuffer<bf16> d_x(std::vector<bf16>(x.begin() + t0 * H, x.begin() + (t0 + n) * H));
      DeviceBuffer<bf16> d_h(std::vector<bf16>(h0.begin() + t0 * H, h0.begin() + (t0 + n) * H));
      DeviceBuffer<int32_t> d_id(std::vector<int32_t>(ids.begin() + t0 * K, ids.begin() + (t0 + n) * K));
      DeviceBuffer<float> d_w(std::vector<float>(tw.begin() + t0 * K, tw.begin() + (t0 + n) * K));
      DeviceBuffer<bf16> d_act(size_t(n) * K * I), d_sact(size_t(n) * I), d_y(size_t(n) * (K + 1) * H);
      d_act.poison();
      d_sact.poison();
      d_y.poison();
      const Nvfp4Shared* fused = y_shared == nullptr ? &sh : nullptr;
      bf16* sact = y_shared == nullptr ? d_sact.get() : nullptr;
      nvfp4_moe_gate_up(d_x.get(), n, H, gs, us, I, d_id.get(), K, d_act.get(), fused, sact, nullptr);
      nvfp4_moe_down_combine(d_act.get(), n, K, ds, I, H, d_id.get(), d_w.get(), fused, sact, y_shared, d_h.get(),
                             nullptr, d_y.get());
      return d_h.download();
    };
    const auto batched = run(0, T, nullptr);
    // The shared expert of the T tokens by the dense skinny kernels (the reference from 3 tokens).
    DeviceBuffer<bf16> d_x(x), d_sact(size_t(T) * I), d_ysh(size_t(T) * H);
    d_sact.poison();
    d_ysh.poison();
    nvfp4_gemv_gate_up(d_x.get(), T, H, dsg.view(), s2g, dsu.view(), s2u, I, d_sact.get(), nullptr);
    nvfp4_gemv(d_sact.get(), T, I, dsd.view(), RowScale2::uniform(s2d), H, d_ysh.get(), nullptr);
    size_t bad = 0, nan = 0;
    for (int t = 0; t < T; ++t) {
      const auto one = run(t, 1, skinny ? d_ysh.get() + int64_t(t) * H : nullptr);
      for (int o = 0; o < H; ++o) {
        const bf16 a = batched[size_t(t) * H + size_t(o)], b = one[size_t(o)];
        bad += a.bits != b.bits;
        nan += std::isnan(bf16_to_float(a));
      }
    }
    EXPECT_EQ(bad, 0u) << "values of a " << T << "-token step differ from one-token routed steps + the "
                       << (skinny ? "skinny" : "one-token") << " shared expert";
    EXPECT_EQ(nan, 0u);
  }
}

TEST(CudaNvfp4, RandomFillHasTheRequestedStatistics) {
  const int64_t rows = 300;
  const int in = 2048;
  const float target = 0.02f;
  const auto pick = nvfp4::random_weight_scale(target);
  DeviceBuffer<uint8_t> codes(size_t(rows) * in / 2), scales(size_t(rows) * in / 16);
  nvfp4_fill_random(codes.get(), scales.get(), rows, in, 1234, pick.scale_lo, pick.scale_hi, nullptr);
  const Nvfp4HostMatrix m{codes.download(), scales.download()};
  const auto w = nvfp4_dequantize_ref(m, rows, in);
  double sum = 0, sq = 0;
  std::set<int> scale_bytes;
  for (float v : w) sum += double(v) * pick.scale2, sq += double(v) * pick.scale2 * double(v) * pick.scale2;
  for (uint8_t s : m.scales) scale_bytes.insert(s);
  const double mean = sum / double(w.size()), std = std::sqrt(sq / double(w.size()) - mean * mean);
  EXPECT_NEAR(std, target, 0.02 * target) << "std of random NVFP4 weights";
  EXPECT_LT(std::fabs(mean), 0.01 * target);
  EXPECT_EQ(int(scale_bytes.size()), pick.scale_hi - pick.scale_lo + 1) << "every scale byte of the range appears";
  EXPECT_EQ(*scale_bytes.begin(), pick.scale_lo);
}

}  // namespace
}  // namespace striker::cuda::testing
