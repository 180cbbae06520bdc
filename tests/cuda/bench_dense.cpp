// Dense kernel benchmarks: embedding gather, RMSNorm, BF16 GEMV (the LM head with fp32 out), cuBLASLt GEMM.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "bench_kernels.h"
#include "bench_util.h"
#include "backends/cuda/elementwise.h"
#include "backends/cuda/embedding.h"
#include "backends/cuda/gemm_lt.h"
#include "backends/cuda/gemv.h"
#include "backends/cuda/rmsnorm.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {

void bench_gemv(std::mt19937& rng, const char* name, int T, int in, int out, bool logits) {
  const double wbytes = double(in) * out * 2;
  const int nc = copies_for(wbytes);
  auto x = random_bf16(rng, size_t(T) * in);
  auto W = random_bf16(rng, size_t(out) * in, 0.05f);
  std::vector<DeviceBuffer<bf16>> ws;
  for (int i = 0; i < nc; ++i) ws.emplace_back(W);
  DeviceBuffer<bf16> d_x(x), d_y(size_t(T) * out);
  DeviceBuffer<float> d_l(size_t(T) * out);
  auto launch = [&](int i) {
    if (logits) gemv_logits(d_x.get(), T, in, ws[size_t(i % nc)].get(), out, d_l.get(), nullptr);
    else gemv_bf16(d_x.get(), T, in, ws[size_t(i % nc)].get(), out, d_y.get(), nullptr);
  };
  d_y.poison();
  d_l.poison();
  launch(0);
  std::vector<float> dot;
  gemv_ref(x, T, in, W, out, dot);
  const auto got = logits ? d_l.download() : to_float(d_y.download());
  const auto c = compare(got, rounded(dot), kBf16Rtol, 1e-3);
  row(name, &c, time_us(launch), wbytes);
}

void bench_gemm(std::mt19937& rng, LtGemm& lt, const char* name, int T, int in, int out) {
  auto x = random_bf16(rng, size_t(T) * in);
  auto W = random_bf16(rng, size_t(out) * in, 0.05f);
  DeviceBuffer<bf16> d_x(x), d_W(W), d_y(size_t(T) * out);
  d_y.poison();
  auto launch = [&](int) { lt.gemm_bf16(d_x.get(), T, in, d_W.get(), out, d_y.get(), nullptr); };
  launch(0);
  // Check the first 16 token rows against the reference (the whole product is too slow on a CPU).
  const int Tc = std::min(T, 16);
  std::vector<bf16> xc(x.begin(), x.begin() + size_t(Tc) * in);
  std::vector<float> dot;
  gemv_ref(xc, Tc, in, W, out, dot);
  auto got = to_float(d_y.download());
  got.resize(size_t(Tc) * out);
  const auto c = compare(got, rounded(dot), kBf16Rtol, 1e-3);
  const double us = time_us(launch);
  char extra[64];
  std::snprintf(extra, sizeof extra, "%.0f TFLOP/s", 2.0 * T * in * out / (us * 1e-6) / 1e12);
  row(name, &c, us, double(in) * out * 2 + double(T) * (in + out) * 2, extra);
}

void bench_rmsnorm(std::mt19937& rng, int rows, int H) {
  auto x = random_bf16(rng, size_t(rows) * H);
  auto w = random_f32(rng, size_t(H), 1.f, 0.2f);
  DeviceBuffer<bf16> d_x(x), d_y(x.size());
  DeviceBuffer<float> d_w(w);
  d_y.poison();
  auto launch = [&](int) { rmsnorm(d_x.get(), d_w.get(), d_y.get(), rows, H, 1e-6f, nullptr); };
  launch(0);
  std::vector<bf16> ref;
  rmsnorm_ref(x, w, ref, rows, H, 1e-6f);
  const auto c = compare(d_y.download(), ref, kBf16Rtol, kBf16Atol);
  row("rmsnorm T=" + std::to_string(rows) + " H=" + std::to_string(H), &c, time_us(launch), 2.0 * x.size() * 2);
}

void bench_embedding(std::mt19937& rng) {
  const int64_t V = 151552, H = 2048;
  auto table = random_bf16(rng, size_t(V * H));
  DeviceBuffer<bf16> d_t(table), d_out(static_cast<size_t>(H));
  std::vector<int32_t> ids = {123457};
  DeviceBuffer<int32_t> d_ids(ids);
  d_out.poison();
  auto launch = [&](int) { embedding_gather(d_t.get(), V, H, d_ids.get(), 1, d_out.get(), nullptr); };
  launch(0);
  std::vector<bf16> ref;
  embedding_gather_ref(table, V, H, ids, ref);
  const auto c = compare(d_out.download(), ref, 0.0, 0.0);
  row("embedding T=1", &c, time_us(launch), double(H) * 2 * 2);
}

}  // namespace striker::cuda::testing

namespace striker::cuda::testing {

namespace {

// Times `launch(i, early)` with early weights off and on; the check of the "early" row is
// bit-identity with the old output (`out` read back after one launch of each, `reset` before
// each: NaN poison, or the starting residual for kernels that update it).
template <typename Out>
void rows_old_vs_early(const std::string& name, const std::function<void(int, bool)>& launch, DeviceBuffer<Out>& out,
                       double bytes, const std::function<void()>& reset = {}) {
  auto fresh = [&] {
    if (reset) reset();
    else out.poison();
  };
  fresh();
  launch(0, false);
  const auto want = out.download();
  fresh();
  launch(0, true);
  const auto c = compare(out.download(), want, 0.0, 0.0);
  row(name + " (old)", nullptr, time_us([&](int i) { launch(i, false); }), bytes);
  row(name + " early", &c, time_us([&](int i) { launch(i, true); }), bytes);
}

}  // namespace

// DecodeTweaks rows (docs/performance.md, "Early weights and fused norm"): the PDL floor, then each
// BF16 decode kernel without and with early weights, and the qkv projection as rmsnorm + GEMV
// (two launches) against the fused norm. Every new variant is checked bit-exact against the old.
void bench_decode_tweaks_dense(std::mt19937& rng) {
  for (int blocks : {1, 132})
    row("pdl chain floor, " + std::to_string(blocks) + " block(s)", nullptr,
        time_us([&](int) { launch_empty_pdl(blocks, nullptr); }), 0);

  const int H = 2048, Q = 5120, O = 4096, Id = 8192;
  const float eps = 1e-6f;
  auto gamma = random_f32(rng, size_t(H), 1.f, 0.2f);
  DeviceBuffer<float> d_gamma(gamma);
  auto copies = [&](int rows, int in) {
    const int nc = copies_for(double(rows) * in * 2);
    auto W = random_bf16(rng, size_t(rows) * in, 0.05f);
    std::vector<DeviceBuffer<bf16>> ws;
    for (int i = 0; i < nc; ++i) ws.emplace_back(W);
    return ws;
  };
  {
    auto h = random_bf16(rng, size_t(H), 3.f);
    DeviceBuffer<bf16> d_h(h), d_y(static_cast<size_t>(H));
    rows_old_vs_early<bf16>("rmsnorm T=1", [&](int, bool e) { rmsnorm(d_h.get(), d_gamma.get(), d_y.get(), 1, H, eps, nullptr, e); },
                            d_y, 2.0 * H * 2);
  }
  {
    const auto ws = copies(Q, H);
    const auto nc = ws.size();
    const double wbytes = double(Q) * H * 2;
    for (int T : {1, 8}) {
      const std::string tag = "qkv 5120x2048 T=" + std::to_string(T);
      auto h = random_bf16(rng, size_t(T) * H, 3.f);
      DeviceBuffer<bf16> d_h(h), d_x(h.size()), d_y(size_t(T) * Q);
      auto gemv = [&](int i, bool e) { gemv_bf16(d_x.get(), T, H, ws[size_t(i) % nc].get(), Q, d_y.get(), nullptr, e); };
      rmsnorm(d_h.get(), d_gamma.get(), d_x.get(), T, H, eps, nullptr);
      rows_old_vs_early<bf16>(tag + " gemv", gemv, d_y, wbytes);
      auto separate = [&](int i, bool e) {
        rmsnorm(d_h.get(), d_gamma.get(), d_x.get(), T, H, eps, nullptr, e);
        gemv(i, e);
      };
      rows_old_vs_early<bf16>(tag + " rmsnorm+gemv", separate, d_y, wbytes);
      d_y.poison();
      separate(0, false);
      const auto want = d_y.download();
      for (bool e : {false, true}) {
        auto fused = [&](int i) {
          gemv_rmsnorm_bf16(d_h.get(), FusedRmsNorm{d_gamma.get(), eps, nullptr}, T, H, ws[size_t(i) % nc].get(), Q,
                            d_y.get(), nullptr, e);
        };
        d_y.poison();
        fused(0);
        const auto c = compare(d_y.download(), want, 0.0, 0.0);
        row(tag + (e ? " fused norm+early" : " fused norm"), &c, time_us(fused), wbytes);
      }
    }
  }
  {
    const auto ws = copies(H, O);
    auto x = random_bf16(rng, size_t(O));
    const auto h0 = random_bf16(rng, size_t(H));
    DeviceBuffer<bf16> d_x(x), d_h(h0);
    rows_old_vs_early<bf16>("o_proj+residual 2048x4096 T=1",
                            [&](int i, bool e) { gemv_residual(d_x.get(), 1, O, ws[size_t(i) % ws.size()].get(), H, d_h.get(), nullptr, e); },
                            d_h, double(H) * O * 2, [&] { d_h.upload(h0); });
  }
  {
    const auto wg = copies(Id, H), wu = copies(Id, H);
    auto x = random_bf16(rng, size_t(H));
    DeviceBuffer<bf16> d_x(x), d_a(static_cast<size_t>(Id));
    rows_old_vs_early<bf16>("dense gate/up 2x8192x2048 T=1",
                            [&](int i, bool e) {
                              gemv_gate_up(d_x.get(), 1, H, wg[size_t(i) % wg.size()].get(), wu[size_t(i) % wu.size()].get(),
                                           Id, d_a.get(), nullptr, e);
                            },
                            d_a, 2.0 * Id * H * 2);
  }
}

}  // namespace striker::cuda::testing
