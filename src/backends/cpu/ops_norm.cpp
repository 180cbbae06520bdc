#include "backends/cpu/ops_norm.h"

#include <cmath>

#include "core/bf16.h"

namespace striker::cpu {

void rmsnorm(const float* x, const float* w, int64_t n, float eps, float* y) {
  // The mean of squares is summed in double: it is one number per row, so accuracy is free.
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i]) * double(x[i]);
  const float r = 1.0f / std::sqrt(float(sum / double(n)) + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = round_bf16(round_bf16(x[i] * r) * w[i]);
}

void rmsnorm_rows(const Mat& x, const std::vector<float>& w, float eps, Mat& out) {
  if (out.rows != x.rows || out.cols != x.cols) out = Mat(x.rows, x.cols);
  for (int64_t t = 0; t < x.rows; ++t) rmsnorm(x.row(t), w.data(), x.cols, eps, out.row(t));
}

void rmsnorm_heads(Mat& x, int64_t head_dim, const std::vector<float>& w, float eps) {
  const int64_t heads = x.cols / head_dim;
  for (int64_t t = 0; t < x.rows; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x.row(t) + h * head_dim;
      rmsnorm(v, w.data(), head_dim, eps, v);
    }
}

}  // namespace striker::cpu
