#include <cmath>

#include "backends/cuda/linear/gemv.h"

namespace striker::cuda {

void gemv_ref(const std::vector<bf16>& x, int T, int in, const std::vector<bf16>& W, int out_dim,
              std::vector<float>& dot) {
  dot.assign(size_t(T) * out_dim, 0.f);
  std::vector<float> wf(static_cast<size_t>(in));
  std::vector<float> xf(static_cast<size_t>(T) * static_cast<size_t>(in));
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = bf16_to_float(x[i]);
  for (int o = 0; o < out_dim; ++o) {
    for (int i = 0; i < in; ++i) wf[size_t(i)] = bf16_to_float(W[size_t(o) * in + i]);
    for (int t = 0; t < T; ++t) {
      double s = 0;
      const float* xr = &xf[size_t(t) * in];
      for (int i = 0; i < in; ++i) s += double(xr[i]) * wf[size_t(i)];
      dot[size_t(t) * out_dim + o] = float(s);
    }
  }
}

void gate_up_ref(const std::vector<bf16>& x, int T, int in, const std::vector<bf16>& Wg,
                 const std::vector<bf16>& Wu, int inter, std::vector<bf16>& act) {
  std::vector<float> g, u;
  gemv_ref(x, T, in, Wg, inter, g);
  gemv_ref(x, T, in, Wu, inter, u);
  act.resize(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const float gr = round_bf16(g[i]);
    const float s = round_bf16(gr / (1.0f + std::exp(-gr)));
    act[i] = float_to_bf16(s * round_bf16(u[i]));
  }
}

}  // namespace striker::cuda
