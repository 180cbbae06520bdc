// Row-major fp32 activations of the CPU backend. Every value that FLINT.md §4 names as BF16
// is held as the fp32 number equal to its bf16 value (rounded with round_bf16).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace striker::cpu {

struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<float> data;

  Mat() = default;
  Mat(int64_t r, int64_t c) : rows(r), cols(c), data(size_t(r * c), 0.0f) {}
  float* row(int64_t r) { return data.data() + r * cols; }
  const float* row(int64_t r) const { return data.data() + r * cols; }
};

}  // namespace striker::cpu
