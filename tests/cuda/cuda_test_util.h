// Helpers for the GPU kernel tests and benchmarks: device buffers, random inputs, NaN poisoning
// and tolerance checks (NaN never passes).
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/common/cuda_check.h"
#include "core/bf16.h"

namespace striker::cuda::testing {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n) STRIKER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  T* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host) {
    STRIKER_CUDA_CHECK(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
    STRIKER_CUDA_CHECK(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
  // All bytes 0xFF: NaN for bf16 and fp32, -1 for integers; anything left unwritten shows.
  void poison() { STRIKER_CUDA_CHECK(cudaMemset(p_, 0xFF, n_ * sizeof(T))); }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// Zero-initialised device words for kernels that exchange through global memory (the decode router);
// every launch must leave them zero again (counters_are_zero).
inline DeviceBuffer<unsigned int> zero_counters(size_t n = 64) {
  return DeviceBuffer<unsigned int>(std::vector<unsigned int>(n, 0u));
}
inline bool counters_are_zero(const DeviceBuffer<unsigned int>& c) {
  for (unsigned int v : c.download())
    if (v != 0u) return false;
  return true;
}

inline std::vector<bf16> random_bf16(std::mt19937& rng, size_t n, float scale = 1.f) {
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<bf16> v(n);
  for (auto& x : v) x = float_to_bf16(dist(rng));
  return v;
}

inline std::vector<float> random_f32(std::mt19937& rng, size_t n, float mean, float scale) {
  std::normal_distribution<float> dist(mean, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Each value rounded to bf16 (kept as float): a GEMV reference's fp32 dots as the kernel stores them.
inline std::vector<float> rounded(const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = round_bf16(v[i]);
  return r;
}

inline std::vector<float> to_float(const std::vector<bf16>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = bf16_to_float(v[i]);
  return f;
}

// All bytes past `n` values of `buf` (a poisoned buffer) are still the poison (0xFF): nothing was written out of bounds.
template <typename T>
bool tail_untouched(const DeviceBuffer<T>& buf, size_t n) {
  const auto v = buf.download();
  const auto* bytes = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = n * sizeof(T); i < v.size() * sizeof(T); ++i)
    if (bytes[i] != 0xFF) return false;
  return true;
}

struct Comparison {
  double max_abs = 0;      // max |got - ref|
  double max_ratio = 0;    // max |got - ref| / (atol + rtol |ref|); <= 1 passes
  size_t nan_count = 0;    // NaN in got where ref is finite
  size_t worst = 0;
  bool ok() const { return nan_count == 0 && max_ratio <= 1.0; }
  std::string describe() const {
    return "max_abs=" + std::to_string(max_abs) + " max_ratio=" + std::to_string(max_ratio) +
           " nan=" + std::to_string(nan_count) + " worst_index=" + std::to_string(worst);
  }
};

// atol is relative to the largest |ref| (summation-order noise scales with the data).
inline Comparison compare(const std::vector<float>& got, const std::vector<float>& ref, double rtol, double atol_rel) {
  Comparison c;
  double ref_max = 0;
  for (float r : ref) ref_max = std::max(ref_max, double(std::fabs(r)));
  const double atol = atol_rel * ref_max + 1e-30;
  if (got.size() != ref.size()) {
    c.nan_count = std::max(got.size(), ref.size());
    return c;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(ref[i])) {  // expected NaN (a deliberately invalid input) must stay NaN
      if (!std::isnan(got[i])) ++c.nan_count;
      continue;
    }
    if (std::isnan(got[i]) || std::isinf(got[i])) {
      if (!(std::isnan(ref[i]) && std::isnan(got[i]))) ++c.nan_count;
      continue;
    }
    const double err = std::fabs(double(got[i]) - ref[i]);
    const double ratio = err / (atol + rtol * std::fabs(ref[i]));
    if (ratio > c.max_ratio) {
      c.max_ratio = ratio;
      c.worst = i;
    }
    c.max_abs = std::max(c.max_abs, err);
  }
  return c;
}

inline Comparison compare(const std::vector<bf16>& got, const std::vector<bf16>& ref, double rtol, double atol_rel) {
  return compare(to_float(got), to_float(ref), rtol, atol_rel);
}

// Tolerances: a bf16 output may differ by one rounding step (2^-8 relative) when the fp32 sum
// is ordered differently; chains of two roundings by two.
constexpr double kBf16Rtol = 1.0 / 64;
constexpr double kBf16Atol = 1.0 / 256;

}  // namespace striker::cuda::testing
