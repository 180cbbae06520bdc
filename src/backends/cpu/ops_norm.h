// rmsnorm of FLINT.md §4: r = 1/sqrt(mean(x²) + eps); y_i = bf16( bf16(x_i·r) · w_i ).
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cpu/tensor.h"

namespace striker::cpu {

// Normalises x[0 .. n) into y (may alias x) with weight w[0 .. n).
void rmsnorm(const float* x, const float* w, int64_t n, float eps, float* y);

// Every row of x, out resized to x's shape.
void rmsnorm_rows(const Mat& x, const std::vector<float>& w, float eps, Mat& out);

// In place, each head of every row separately: row = [heads, head_dim], w has head_dim entries
// shared by every head (q_norm / k_norm).
void rmsnorm_heads(Mat& x, int64_t head_dim, const std::vector<float>& w, float eps);

}  // namespace striker::cpu
