#include <cmath>

#include "backends/cuda/moe/moe.h"

namespace striker::cuda {
namespace {

// bf16(mm(x, W[row])) with W [rows, in] starting at `w`.
float dot_row(const bf16* x, const bf16* w, int in) {
  double s = 0;
  for (int i = 0; i < in; ++i) s += double(bf16_to_float(x[i])) * bf16_to_float(w[i]);
  return round_bf16(float(s));
}

// swiglu of one token through one expert whose weights start at g/u/d.
std::vector<float> swiglu_row(const bf16* x, const bf16* g, const bf16* u, const bf16* d, int hidden, int inter) {
  std::vector<bf16> a(static_cast<size_t>(inter));
  for (int i = 0; i < inter; ++i) {
    const float gv = dot_row(x, g + size_t(i) * hidden, hidden);
    const float uv = dot_row(x, u + size_t(i) * hidden, hidden);
    a[size_t(i)] = float_to_bf16(round_bf16(gv / (1.0f + std::exp(-gv))) * uv);
  }
  std::vector<float> y(static_cast<size_t>(hidden));
  for (int o = 0; o < hidden; ++o) y[size_t(o)] = dot_row(a.data(), d + size_t(o) * inter, inter);
  return y;
}

}  // namespace

void moe_ref(const std::vector<bf16>& x, int T, int hidden, int inter, int shared_inter, const MoeRefWeights& w,
             const std::vector<int32_t>& topk_ids, const std::vector<float>& topk_w, int K, std::vector<bf16>& h) {
  for (int t = 0; t < T; ++t) {
    const bf16* xt = &x[size_t(t) * hidden];
    std::vector<double> sum(static_cast<size_t>(hidden), 0.0);
    for (int k = 0; k < K; ++k) {
      const size_t e = size_t(topk_ids[size_t(t) * K + k]);
      const auto y = swiglu_row(xt, w.gate->data() + e * inter * hidden, w.up->data() + e * inter * hidden,
                                w.down->data() + e * hidden * inter, hidden, inter);
      for (int o = 0; o < hidden; ++o) sum[size_t(o)] += double(topk_w[size_t(t) * K + k]) * y[size_t(o)];
    }
    std::vector<float> shared;
    if (w.shared_gate)
      shared = swiglu_row(xt, w.shared_gate->data(), w.shared_up->data(), w.shared_down->data(), hidden, shared_inter);
    for (int o = 0; o < hidden; ++o) {
      float y = round_bf16(float(sum[size_t(o)]));
      if (!shared.empty()) y = round_bf16(y + shared[size_t(o)]);
      bf16& hv = h[size_t(t) * hidden + o];
      hv = float_to_bf16(bf16_to_float(hv) + y);
    }
  }
}

}  // namespace striker::cuda
