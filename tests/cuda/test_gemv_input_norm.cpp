// The one-token GEMVs with the input norm inside (x = rmsnorm(h) formed by every CTA, gemv.h /
// nvfp4_linear.h `InputNorm`): against the CPU reference (rmsnorm_ref, then the GEMV's reference),
// and bit for bit against the rmsnorm kernel followed by the same GEMV without the norm, which is
// the path they replace (the dot products are the same code in the same order, so equal outputs
// mean the x formed inside equals the rmsnorm kernel's x). Fresh random inputs per shape, poisoned
// outputs with a poisoned tail, widths off every tile and chunk multiple, warps past the last row;
// NaN in h must reach every output (compare: NaN never passes where the reference is finite).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/cuda/elementwise/rmsnorm.h"
#include "core/error.h"
#include "backends/cuda/linear/gemv.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "cuda_test_util.h"
#include "nvfp4_test_util.h"

namespace striker::cuda::testing {
namespace {

constexpr float kEps = 1e-6f;
constexpr size_t kTail = 64;  // poisoned elements past every output

struct Shape {
  int in, out;
};

inline float float_of(float v) { return v; }
inline float float_of(bf16 v) { return bf16_to_float(v); }

// Equal bit for bit (two NaNs count as equal: the reference path and the fused one both produce NaN).
template <typename T>
size_t bit_mismatches(const std::vector<T>& a, const std::vector<T>& b, size_t n) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const float fa = float_of(a[i]), fb = float_of(b[i]);
    if (std::isnan(fa) && std::isnan(fb)) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) ++bad;
  }
  return bad;
}

// h (one row) with a NaN at `nan_at` when >= 0; gamma around 1.
struct NormInput {
  std::vector<bf16> h;
  std::vector<float> gamma;
  std::vector<bf16> x_ref;  // rmsnorm_ref(h)
};
NormInput norm_input(std::mt19937& rng, int in, int nan_at = -1) {
  NormInput n;
  n.h = random_bf16(rng, size_t(in), 3.f);
  if (nan_at >= 0) n.h[size_t(nan_at)] = float_to_bf16(std::numeric_limits<float>::quiet_NaN());
  n.gamma = random_f32(rng, size_t(in), 1.f, 0.3f);
  rmsnorm_ref(n.h, n.gamma, n.x_ref, 1, in, kEps);
  return n;
}

// Every output NaN (a NaN in h makes r and so every x NaN).
template <typename T>
bool all_nan(const std::vector<T>& v, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!std::isnan(float_of(v[i]))) return false;
  return true;
}

// The checks every one-token output gets: bit for bit the rmsnorm kernel + the same kernel without
// the norm (`d_plain`), the poisoned tail untouched, and then either NaN everywhere (a NaN in h) or
// the CPU reference within `rtol`.
template <typename R>
void expect_norm_inside_output(const DeviceBuffer<bf16>& d_fused, const DeviceBuffer<bf16>& d_plain, size_t n,
                               bool nan_in_h, const std::vector<R>& ref, double rtol) {
  const auto fused = d_fused.download(), plain = d_plain.download();
  EXPECT_EQ(bit_mismatches(fused, plain, n), 0u) << "fused != rmsnorm kernel + the kernel without the norm";
  EXPECT_TRUE(tail_untouched(d_fused, n));
  if (nan_in_h) {
    EXPECT_TRUE(all_nan(fused, n)) << "a NaN in h reaches every output";
    return;
  }
  std::vector<R> got(n);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<R, float>) got[i] = bf16_to_float(fused[i]);
    else got[i] = fused[i];
  }
  const auto c = compare(got, ref, rtol, 2e-3);
  EXPECT_TRUE(c.ok()) << c.describe();
}

// in: 2048 (Flint: QKV splits each row over 8 warps), 1000 (< 1024: 4 rows per warp; not a
// multiple of 256, so the norm's threads hold unequal counts), 1536 and 2040 (2 rows per warp),
// 8 (one chunk); out off every tile, and >= 32768 (the LM head's grid).
TEST(CudaGemvInputNorm, Bf16StoreAndLogitsMatchReferenceAndTheRmsnormKernelBitForBit) {
  std::mt19937 rng(1101);
  const std::vector<Shape> shapes = {{2048, 1001}, {2048, 5120}, {1000, 77}, {1536, 300},
                                     {2040, 33},   {8, 3},       {2048, 33000}, {264, 32769}};
  for (const Shape s : shapes) {
    for (int nan_at : {-1, s.in / 3}) {
      SCOPED_TRACE("in=" + std::to_string(s.in) + " out=" + std::to_string(s.out) + " nan_at=" + std::to_string(nan_at));
      const NormInput n = norm_input(rng, s.in, nan_at);
      auto W = random_bf16(rng, size_t(s.out) * s.in, 0.05f);
      std::vector<float> dot;
      gemv_ref(n.x_ref, 1, s.in, W, s.out, dot);
      const auto ref = rounded(dot);
      DeviceBuffer<bf16> d_h(n.h), d_W(W), d_x(size_t(s.in)), d_fused(s.out + kTail), d_plain(s.out + kTail);
      DeviceBuffer<float> d_g(n.gamma), d_lf(s.out + kTail), d_lp(s.out + kTail);
      d_x.poison();
      d_fused.poison();
      d_plain.poison();
      d_lf.poison();
      d_lp.poison();
      const InputNorm norm{d_g.get(), kEps};
      gemv_bf16(d_h.get(), 1, s.in, d_W.get(), s.out, d_fused.get(), nullptr, &norm);
      gemv_logits(d_h.get(), 1, s.in, d_W.get(), s.out, d_lf.get(), nullptr, &norm);
      rmsnorm(d_h.get(), d_g.get(), d_x.get(), 1, s.in, kEps, nullptr);  // the path the norm inside replaces
      gemv_bf16(d_x.get(), 1, s.in, d_W.get(), s.out, d_plain.get(), nullptr);
      gemv_logits(d_x.get(), 1, s.in, d_W.get(), s.out, d_lp.get(), nullptr);
      const auto fused = d_fused.download(), plain = d_plain.download();
      const auto lf = d_lf.download(), lp = d_lp.download();
      EXPECT_EQ(bit_mismatches(fused, plain, size_t(s.out)), 0u) << "store: fused != rmsnorm kernel + GEMV";
      EXPECT_EQ(bit_mismatches(lf, lp, size_t(s.out)), 0u) << "logits: fused != rmsnorm kernel + GEMV";
      EXPECT_TRUE(tail_untouched(d_fused, size_t(s.out)));
      EXPECT_TRUE(tail_untouched(d_lf, size_t(s.out)));
      std::vector<float> got(fused.size() - kTail), got_l(lf.begin(), lf.end() - kTail);
      for (size_t i = 0; i < got.size(); ++i) got[i] = bf16_to_float(fused[i]);
      if (nan_at >= 0) {
        EXPECT_TRUE(all_nan(fused, size_t(s.out)) && all_nan(lf, size_t(s.out))) << "a NaN in h reaches every output";
        continue;
      }
      // rmsnorm_ref sums in double: its x may differ from the kernel's by one bf16 step here and there.
      auto c = compare(got, ref, 2 * kBf16Rtol, 2e-3);
      EXPECT_TRUE(c.ok()) << "store " << c.describe();
      c = compare(got_l, ref, 2 * kBf16Rtol, 2e-3);
      EXPECT_TRUE(c.ok()) << "logits " << c.describe();
    }
  }
}

// Gate/up + SwiGLU: inter < 4096 splits each row over 8 warps (the shared-expert form), larger
// ones do not; odd inter leaves warps of the last CTA without a row (they still take part in the
// norm's barriers).
TEST(CudaGemvInputNorm, Bf16GateUpMatchesReferenceAndTheRmsnormKernelBitForBit) {
  std::mt19937 rng(1102);
  const std::vector<Shape> shapes = {{2048, 512}, {2048, 5003}, {1000, 77}, {264, 33}, {2048, 4097}};
  for (const Shape s : shapes) {
    for (int nan_at : {-1, s.in - 1}) {
      SCOPED_TRACE("in=" + std::to_string(s.in) + " inter=" + std::to_string(s.out) + " nan_at=" + std::to_string(nan_at));
      const NormInput n = norm_input(rng, s.in, nan_at);
      auto Wg = random_bf16(rng, size_t(s.out) * s.in, 0.05f);
      auto Wu = random_bf16(rng, size_t(s.out) * s.in, 0.05f);
      std::vector<bf16> ref;
      gate_up_ref(n.x_ref, 1, s.in, Wg, Wu, s.out, ref);
      DeviceBuffer<bf16> d_h(n.h), d_g(Wg), d_u(Wu), d_x(size_t(s.in)), d_fused(s.out + kTail), d_plain(s.out + kTail);
      DeviceBuffer<float> d_gamma(n.gamma);
      d_x.poison();
      d_fused.poison();
      d_plain.poison();
      const InputNorm norm{d_gamma.get(), kEps};
      gemv_gate_up(d_h.get(), 1, s.in, d_g.get(), d_u.get(), s.out, d_fused.get(), nullptr, &norm);
      rmsnorm(d_h.get(), d_gamma.get(), d_x.get(), 1, s.in, kEps, nullptr);
      gemv_gate_up(d_x.get(), 1, s.in, d_g.get(), d_u.get(), s.out, d_plain.get(), nullptr);
      expect_norm_inside_output(d_fused, d_plain, size_t(s.out), nan_at >= 0, ref, 4 * kBf16Rtol);
    }
  }
}

// ---- NVFP4 ----

// in: multiples of 64 up to 2048 (1984, 576: a lane's chunk count differs across lanes; 64: one
// chunk); out off the tile, >= 8192 (the unsplit grid), with three scale2 row ranges as q|k|v.
// (The NVFP4 LM head keeps the separate norm: nvfp4_linear.h.)
TEST(CudaGemvInputNorm, Nvfp4StoreMatchesReferenceAndTheRmsnormKernelBitForBit) {
  std::mt19937 rng(1103);
  const std::vector<Shape> shapes = {{2048, 1001}, {2048, 5120}, {1984, 37}, {576, 300}, {64, 5}, {2048, 16385}};
  for (const Shape s : shapes) {
    for (int nan_at : {-1, 7}) {
      SCOPED_TRACE("in=" + std::to_string(s.in) + " out=" + std::to_string(s.out) + " nan_at=" + std::to_string(nan_at));
      const NormInput n = norm_input(rng, s.in, nan_at);
      auto W = random_nvfp4(rng, s.out, s.in);
      const RowScale2 s2{s.out / 3, s.out / 3 + s.out / 5 + 1, {0.0137f, 0.0021f, 0.0433f}};
      std::vector<float> dot;
      nvfp4_gemv_ref(n.x_ref, 1, s.in, W, s2, s.out, dot);
      const auto ref = rounded(dot);
      DeviceNvfp4Matrix dW(W);
      DeviceBuffer<bf16> d_h(n.h), d_x(size_t(s.in)), d_fused(s.out + kTail), d_plain(s.out + kTail);
      DeviceBuffer<float> d_g(n.gamma);
      d_x.poison();
      d_fused.poison();
      d_plain.poison();
      const InputNorm norm{d_g.get(), kEps};
      nvfp4_gemv(d_h.get(), 1, s.in, dW.view(), s2, s.out, d_fused.get(), nullptr, &norm);
      rmsnorm(d_h.get(), d_g.get(), d_x.get(), 1, s.in, kEps, nullptr);
      nvfp4_gemv(d_x.get(), 1, s.in, dW.view(), s2, s.out, d_plain.get(), nullptr);
      expect_norm_inside_output(d_fused, d_plain, size_t(s.out), nan_at >= 0, ref, 2 * kBf16Rtol);
    }
  }
}

TEST(CudaGemvInputNorm, Nvfp4GateUpMatchesReferenceAndTheRmsnormKernelBitForBit) {
  std::mt19937 rng(1104);
  const std::vector<Shape> shapes = {{2048, 512}, {2048, 1003}, {576, 77}, {64, 9}, {2048, 5120}};
  for (const Shape s : shapes) {
    for (int nan_at : {-1, 0}) {
      SCOPED_TRACE("in=" + std::to_string(s.in) + " inter=" + std::to_string(s.out) + " nan_at=" + std::to_string(nan_at));
      const NormInput n = norm_input(rng, s.in, nan_at);
      auto Wg = random_nvfp4(rng, s.out, s.in), Wu = random_nvfp4(rng, s.out, s.in);
      const float s2g = 0.011f, s2u = 0.0047f;
      std::vector<bf16> ref;
      nvfp4_gate_up_ref(n.x_ref, 1, s.in, Wg, s2g, Wu, s2u, s.out, ref);
      DeviceNvfp4Matrix dg(Wg), du(Wu);
      DeviceBuffer<bf16> d_h(n.h), d_x(size_t(s.in)), d_fused(s.out + kTail), d_plain(s.out + kTail);
      DeviceBuffer<float> d_gamma(n.gamma);
      d_x.poison();
      d_fused.poison();
      d_plain.poison();
      const InputNorm norm{d_gamma.get(), kEps};
      nvfp4_gemv_gate_up(d_h.get(), 1, s.in, dg.view(), s2g, du.view(), s2u, s.out, d_fused.get(), nullptr, &norm);
      rmsnorm(d_h.get(), d_gamma.get(), d_x.get(), 1, s.in, kEps, nullptr);
      nvfp4_gemv_gate_up(d_x.get(), 1, s.in, dg.view(), s2g, du.view(), s2u, s.out, d_plain.get(), nullptr);
      expect_norm_inside_output(d_fused, d_plain, size_t(s.out), nan_at >= 0, ref, 4 * kBf16Rtol);
    }
  }
}

// The norm inside takes one token, widths up to 2048 in multiples of 8, aligned weights.
TEST(CudaGemvInputNorm, RejectsWhatTheBlockNormCannotTake) {
  DeviceBuffer<bf16> h(8 * 4096), W(8 * 4096), y(64);
  DeviceBuffer<float> g(4096 + 4);
  const InputNorm ok{g.get(), kEps}, misaligned{g.get() + 1, kEps}, none{nullptr, kEps};
  EXPECT_THROW(gemv_bf16(h.get(), 2, 2048, W.get(), 8, y.get(), nullptr, &ok), Error);  // two tokens
  EXPECT_THROW(gemv_bf16(h.get(), 1, 2056, W.get(), 8, y.get(), nullptr, &ok), Error);  // wider than 2048
  EXPECT_THROW(gemv_bf16(h.get(), 1, 2048, W.get(), 8, y.get(), nullptr, &misaligned), Error);
  EXPECT_THROW(gemv_gate_up(h.get(), 1, 2048, W.get(), W.get(), 8, y.get(), nullptr, &none), Error);
}

}  // namespace
}  // namespace striker::cuda::testing
