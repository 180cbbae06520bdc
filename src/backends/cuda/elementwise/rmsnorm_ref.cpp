#include <cmath>

#include "backends/cuda/elementwise/rmsnorm.h"

namespace striker::cuda {
namespace {

void norm_row(const bf16* x, const float* w, bf16* y, int hidden, float eps) {
  double ss = 0;
  for (int i = 0; i < hidden; ++i) ss += double(bf16_to_float(x[i])) * bf16_to_float(x[i]);
  const float r = 1.0f / std::sqrt(float(ss / hidden) + eps);
  for (int i = 0; i < hidden; ++i) y[i] = float_to_bf16(round_bf16(bf16_to_float(x[i]) * r) * w[i]);
}

}  // namespace

void rmsnorm_ref(const std::vector<bf16>& x, const std::vector<float>& w, std::vector<bf16>& out, int rows,
                 int hidden, float eps) {
  out.resize(size_t(rows) * hidden);
  for (int r = 0; r < rows; ++r) norm_row(&x[size_t(r) * hidden], w.data(), &out[size_t(r) * hidden], hidden, eps);
}

void add_rmsnorm_ref(std::vector<bf16>& h, const std::vector<bf16>& delta, const std::vector<float>& w,
                     std::vector<bf16>& out, int rows, int hidden, float eps) {
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = float_to_bf16(bf16_to_float(h[i]) + bf16_to_float(delta[i]));
  rmsnorm_ref(h, w, out, rows, hidden, eps);
}

}  // namespace striker::cuda
