// CPU references of the NVFP4 kernels, written on model/nvfp4's scalar codec (not on the
// kernels' bit tricks), with double accumulation and the FLINT.md §4 rounding points.
#include <cmath>

#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "backends/cuda/nvfp4/nvfp4_moe.h"
#include "model/nvfp4.h"

namespace striker::cuda {

std::vector<float> nvfp4_dequantize_ref(const Nvfp4HostMatrix& W, int64_t rows, int in) {
  std::vector<float> out(size_t(rows) * size_t(in));
  for (int64_t r = 0; r < rows; ++r)
    for (int i = 0; i < in; ++i) {
      const uint8_t byte = W.codes[size_t(r) * size_t(in / 2) + size_t(i / 2)];
      const uint8_t code = (i % 2 == 0) ? (byte & 0xF) : (byte >> 4);
      const float scale = nvfp4::ue4m3_value(W.scales[size_t(r) * size_t(in / 16) + size_t(i / 16)]);
      out[size_t(r) * size_t(in) + size_t(i)] = nvfp4::e2m1_value(code) * scale;
    }
  return out;
}

void nvfp4_gemv_ref(const std::vector<bf16>& x, int T, int in, const Nvfp4HostMatrix& W, RowScale2 scale2,
                    int out_dim, std::vector<float>& dot) {
  const auto wf = nvfp4_dequantize_ref(W, out_dim, in);
  dot.assign(size_t(T) * size_t(out_dim), 0.f);
  for (int t = 0; t < T; ++t)
    for (int o = 0; o < out_dim; ++o) {
      double s = 0;
      for (int i = 0; i < in; ++i)
        s += double(bf16_to_float(x[size_t(t) * in + i])) * wf[size_t(o) * size_t(in) + size_t(i)];
      dot[size_t(t) * out_dim + o] = float(double(scale2.at(o)) * s);
    }
}

void nvfp4_gate_up_ref(const std::vector<bf16>& x, int T, int in, const Nvfp4HostMatrix& Wg, float scale2_g,
                       const Nvfp4HostMatrix& Wu, float scale2_u, int inter, std::vector<bf16>& act) {
  std::vector<float> g, u;
  nvfp4_gemv_ref(x, T, in, Wg, RowScale2::uniform(scale2_g), inter, g);
  nvfp4_gemv_ref(x, T, in, Wu, RowScale2::uniform(scale2_u), inter, u);
  act.resize(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const float gr = round_bf16(g[i]);
    act[i] = float_to_bf16(round_bf16(gr / (1.0f + std::exp(-gr))) * round_bf16(u[i]));
  }
}

namespace {

float dot_row(const bf16* x, const float* w, int in) {
  double s = 0;
  for (int i = 0; i < in; ++i) s += double(bf16_to_float(x[i])) * w[i];
  return round_bf16(float(s));
}

std::vector<float> swiglu_row(const bf16* x, const float* g, const float* u, const float* d, int hidden, int inter) {
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

void moe_float_ref(const std::vector<bf16>& x, int T, int hidden, int inter, int shared_inter,
                   const MoeFloatWeights& w, const std::vector<int32_t>& topk_ids, const std::vector<float>& topk_w,
                   int K, std::vector<bf16>& h) {
  for (int t = 0; t < T; ++t) {
    const bf16* xt = &x[size_t(t) * hidden];
    std::vector<double> sum(static_cast<size_t>(hidden), 0.0);
    for (int k = 0; k < K; ++k) {
      const size_t e = size_t(topk_ids[size_t(t) * K + k]);
      const size_t n = size_t(inter) * size_t(hidden);
      const auto y = swiglu_row(xt, w.gate->data() + e * n, w.up->data() + e * n, w.down->data() + e * n, hidden,
                                inter);
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
