// Random NVFP4 weights for the GPU tests (test_nvfp4.cpp, test_gemv_input_norm.cpp, the grouped-MoE
// tests) and one matrix's codes and scales on the device.
#pragma once
#include <cstdint>
#include <random>

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

}  // namespace striker::cuda::testing
