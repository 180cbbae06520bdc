// Timing and table rows shared by the kernel benchmarks (bench_util.h).
#include "bench_util.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "backends/cuda/common/cuda_check.h"

namespace striker::cuda::testing {

namespace {

constexpr double kReadRoof = 4.6e12;  // bytes/s, streaming reads on the H200 (performance.md §10)
int g_failures = 0;

}  // namespace

cudaStream_t bench_stream() {
  static cudaStream_t s = [] {
    cudaStream_t t = nullptr;
    STRIKER_CUDA_CHECK(cudaStreamCreate(&t));
    return t;
  }();
  return s;
}

namespace {
bool g_graphed = true;

// time of `samples` runs of run(), each timed with events on the bench stream, median.
double median_ms(const std::function<void()>& run, int samples) {
  cudaEvent_t a, b;
  STRIKER_CUDA_CHECK(cudaEventCreate(&a));
  STRIKER_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> v;
  for (int s = 0; s < samples; ++s) {
    STRIKER_CUDA_CHECK(cudaEventRecord(a, bench_stream()));
    run();
    STRIKER_CUDA_CHECK(cudaEventRecord(b, bench_stream()));
    STRIKER_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    STRIKER_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    v.push_back(double(ms));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

bool time_was_graphed() { return g_graphed; }

double time_us(const std::function<void(int)>& launch) {
  constexpr int kLaunches = 20;
  for (int i = 0; i < 3; ++i) launch(i);  // warm-up (cuBLASLt plans, first-use setup) outside the capture
  STRIKER_CUDA_CHECK(cudaStreamSynchronize(bench_stream()));
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool ok = cudaStreamBeginCapture(bench_stream(), cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  if (ok) {
    try {
      for (int i = 0; i < kLaunches; ++i) launch(i);
    } catch (...) {
      ok = false;
    }
    ok = cudaStreamEndCapture(bench_stream(), &g) == cudaSuccess && ok && g != nullptr;
    ok = ok && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess;
  }
  (void)cudaGetLastError();  // a failed capture leaves an error behind
  g_graphed = ok;
  double ms;
  if (ok) {
    STRIKER_CUDA_CHECK(cudaGraphLaunch(exec, bench_stream()));
    ms = median_ms([&] { STRIKER_CUDA_CHECK(cudaGraphLaunch(exec, bench_stream())); }, 7);
  } else {
    int it = 0;
    ms = median_ms([&] { for (int r = 0; r < kLaunches; ++r) launch(it++); }, 7);
  }
  if (exec) cudaGraphExecDestroy(exec);
  if (g) cudaGraphDestroy(g);
  return ms * 1000.0 / kLaunches;
}

void row(const std::string& name, const Comparison* c, double us, double bytes, const std::string& extra) {
  const bool ok = c == nullptr || c->ok();
  if (!ok) ++g_failures;
  char check[64];
  if (c) std::snprintf(check, sizeof check, "%s %.3f", ok ? "PASS" : "FAIL", c->max_ratio);
  else std::snprintf(check, sizeof check, "-");
  const double gbs = bytes / (us * 1e-6) / 1e9;
  std::printf("| %-34s | %-10s | %9.2f | %8.0f | %5.2f | %s%s\n", name.c_str(), check, us, gbs, gbs * 1e9 / kReadRoof,
              g_graphed ? "" : "(stream launches) ", extra.c_str());
  std::fflush(stdout);
}

void count_kernel_check_failure() { ++g_failures; }
int kernel_check_failures() { return g_failures; }

void row_checked_h(const std::string& name, const std::function<void(int)>& launch, DeviceBuffer<bf16>& d_h,
                   const std::vector<bf16>& h0, const std::vector<bf16>& want, double bytes,
                   const std::function<std::string(double)>& extra) {
  d_h.upload(h0);
  launch(0);
  auto got = d_h.download();
  got.resize(want.size());
  const auto c = compare(got, want, 2 * kBf16Rtol, kBf16Atol);
  const double us = time_us(launch);
  row(name, &c, us, bytes, extra(us));
}

int copies_for(double bytes) { return int(std::max(1.0, std::ceil(256.0 * (1 << 20) / bytes))); }

Comparison compare_finite(const std::vector<bf16>& got, const std::vector<bf16>& ref, double rtol, double atol_rel) {
  Comparison c = compare(got, ref, rtol, atol_rel);
  for (bf16 v : got)
    if (!std::isfinite(bf16_to_float(v))) ++c.nan_count;
  return c;
}

std::string tflops_note(double flops, double us) {
  constexpr double kBf16Peak = 774e12;  // FLOP/s, dense bf16 measured on the H200 (docs/performance.md)
  const double rate = flops / (us * 1e-6);
  char b[64];
  std::snprintf(b, sizeof b, "%.0f TFLOP/s (%.2f of 774)", rate / 1e12, rate / kBf16Peak);
  return b;
}

}  // namespace striker::cuda::testing
