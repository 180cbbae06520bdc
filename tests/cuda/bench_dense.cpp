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
#include "backends/cuda/elementwise/elementwise.h"
#include "backends/cuda/elementwise/embedding.h"
#include "backends/cuda/linear/gemm_lt.h"
#include "backends/cuda/linear/gemv.h"
#include "backends/cuda/common/pdl_probe.h"
#include "backends/cuda/elementwise/rmsnorm.h"
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
    if (logits) gemv_logits(d_x.get(), T, in, ws[size_t(i % nc)].get(), out, d_l.get(), bench_stream());
    else gemv_bf16(d_x.get(), T, in, ws[size_t(i % nc)].get(), out, d_y.get(), bench_stream());
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
  auto launch = [&](int) { lt.gemm_bf16(d_x.get(), T, in, d_W.get(), out, d_y.get(), bench_stream()); };
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
  auto launch = [&](int) { rmsnorm(d_x.get(), d_w.get(), d_y.get(), rows, H, 1e-6f, bench_stream()); };
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
  auto launch = [&](int) { embedding_gather(d_t.get(), V, H, d_ids.get(), 1, d_out.get(), bench_stream()); };
  launch(0);
  std::vector<bf16> ref;
  embedding_gather_ref(table, V, H, ids, ref);
  const auto c = compare(d_out.download(), ref, 0.0, 0.0);
  row("embedding T=1", &c, time_us(launch), double(H) * 2 * 2);
}

// The per-launch floor the decode kernels' rows are read against: an empty kernel launched
// back to back as dependent (PDL) launches, with 1 block and with one block per H200 SM.
void bench_pdl_chain_floor() {
  for (int blocks : {1, 132})
    row("pdl chain floor, " + std::to_string(blocks) + " block(s)", nullptr,
        time_us([&](int) { launch_empty_pdl(blocks, bench_stream()); }), 0);
}

}  // namespace striker::cuda::testing
