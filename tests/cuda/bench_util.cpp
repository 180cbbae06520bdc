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

constexpr double kCopyRoof = 4.1e12;  // bytes/s, measured device-to-device copy on the H200
int g_failures = 0;

}  // namespace

double time_us(const std::function<void(int)>& launch) {
  cudaEvent_t a, b;
  STRIKER_CUDA_CHECK(cudaEventCreate(&a));
  STRIKER_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) launch(i);
  std::vector<double> samples;
  int it = 0;
  for (int s = 0; s < 7; ++s) {
    STRIKER_CUDA_CHECK(cudaEventRecord(a));
    for (int r = 0; r < 20; ++r) launch(it++);
    STRIKER_CUDA_CHECK(cudaEventRecord(b));
    STRIKER_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    STRIKER_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    samples.push_back(double(ms) * 1000.0 / 20);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

void row(const std::string& name, const Comparison* c, double us, double bytes, const std::string& extra) {
  const bool ok = c == nullptr || c->ok();
  if (!ok) ++g_failures;
  char check[64];
  if (c) std::snprintf(check, sizeof check, "%s %.3f", ok ? "PASS" : "FAIL", c->max_ratio);
  else std::snprintf(check, sizeof check, "-");
  const double gbs = bytes / (us * 1e-6) / 1e9;
  std::printf("| %-34s | %-10s | %9.2f | %8.0f | %5.2f | %s\n", name.c_str(), check, us, gbs, gbs * 1e9 / kCopyRoof,
              extra.c_str());
  std::fflush(stdout);
}

void count_kernel_check_failure() { ++g_failures; }
int kernel_check_failures() { return g_failures; }

int copies_for(double bytes) { return int(std::max(1.0, std::ceil(256.0 * (1 << 20) / bytes))); }

std::vector<float> rounded(const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = round_bf16(v[i]);
  return r;
}

}  // namespace striker::cuda::testing
