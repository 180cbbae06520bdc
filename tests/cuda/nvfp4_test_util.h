// Random NVFP4 weights for the GPU tests (test_nvfp4.cpp, test_gemv_input_norm.cpp, the MoE tests),
// one matrix's codes and scales on the device, a random routing and a stack's float copy.
#pragma once
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "backends/cuda/nvfp4/nvfp4_scales.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {

// Codes uniform over all bytes; scale bytes uniform in [lo, hi].
inline Nvfp4HostMatrix random_nvfp4(std::mt19937& rng, int64_t rows, int in, int lo = 0x30, int hi = 0x40) {
  Nvfp4HostMatrix m;
  m.codes.resize(size_t(rows) * size_t(in / 2));
  m.scales.resize(size_t(rows) * size_t(in / 16));
  for (auto& c : m.codes) c = uint8_t(rng() & 0xFF);
  std::uniform_int_distribution<int> sd(lo, hi);
  for (auto& s : m.scales) s = uint8_t(sd(rng));
  return m;
}

// Scale bytes go up as the loader's do (nvfp4_upload_scales: canonical, no 0x7F), which the
// tensor-core kernels rely on.
inline DeviceBuffer<uint8_t> upload_scales(const std::vector<uint8_t>& host) {
  DeviceBuffer<uint8_t> d(host.size());
  nvfp4_upload_scales(d.get(), host.data(), host.size());
  return d;
}

struct DeviceNvfp4Matrix {
  DeviceBuffer<uint8_t> codes, scales;
  explicit DeviceNvfp4Matrix(const Nvfp4HostMatrix& m) : codes(m.codes), scales(upload_scales(m.scales)) {}
  Nvfp4Matrix view() const { return {codes.get(), scales.get()}; }
};

// A routing of T tokens: K distinct experts of E each (ascending ids), weights uniform in [0.1, 1).
inline void random_topk(std::mt19937& rng, int T, int K, int E, std::vector<int32_t>& ids, std::vector<float>& tw) {
  std::uniform_real_distribution<float> uw(0.1f, 1.f);
  for (int t = 0; t < T; ++t) {
    std::set<int32_t> chosen;
    while (chosen.size() < size_t(K)) chosen.insert(int32_t(rng() % E));
    for (int e : chosen) ids.push_back(e), tw.push_back(uw(rng));
  }
}

// Host float copy of a stack of E matrices, each times its scale2.
inline std::vector<float> scaled_floats(const Nvfp4HostMatrix& m, int64_t rows, int in,
                                        const std::vector<float>& s2, int64_t per) {
  auto f = nvfp4_dequantize_ref(m, rows, in);
  for (size_t i = 0; i < f.size(); ++i) f[i] *= s2[i / size_t(per)];
  return f;
}

}  // namespace striker::cuda::testing
