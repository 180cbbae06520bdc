#include <cmath>

#include "backends/cuda/attention/qk_rope_kv.h"

namespace striker::cuda {

void qk_norm_rope_kv_write_ref(const std::vector<bf16>& qkv, int T, const HeadShape& hs,
                               const std::vector<float>& q_norm_w, const std::vector<float>& k_norm_w, float eps,
                               const std::vector<int32_t>& positions, const std::vector<float>* inv_freq,
                               const std::vector<int64_t>& slots, int block_size, std::vector<bf16>& k_cache,
                               std::vector<bf16>& v_cache, std::vector<bf16>& q_out) {
  const int d = hs.head_dim, nh = hs.n_heads, nkv = hs.n_kv_heads, heads = nh + 2 * nkv;
  q_out.resize(size_t(T) * nh * d);
  std::vector<float> x(static_cast<size_t>(d)), y(static_cast<size_t>(d));
  for (int t = 0; t < T; ++t) {
    for (int head = 0; head < heads; ++head) {
      const bf16* src = &qkv[(size_t(t) * heads + head) * d];
      for (int i = 0; i < d; ++i) x[size_t(i)] = bf16_to_float(src[i]);
      const bool is_v = head >= nh + nkv;
      if (!is_v) {
        const auto& w = head < nh ? q_norm_w : k_norm_w;
        double ss = 0;
        for (int i = 0; i < d; ++i) ss += double(x[size_t(i)]) * x[size_t(i)];
        const float r = 1.0f / std::sqrt(float(ss / d) + eps);
        for (int i = 0; i < d; ++i) x[size_t(i)] = round_bf16(round_bf16(x[size_t(i)] * r) * w[size_t(i)]);
        if (inv_freq) {
          y = x;
          for (int i = 0; i < d / 2; ++i) {
            const float phi = float(positions[size_t(t)]) * (*inv_freq)[size_t(i)];
            const float c = round_bf16(float(std::cos(double(phi)))), s = round_bf16(float(std::sin(double(phi))));
            const float a = x[size_t(i)], b = x[size_t(i + d / 2)];
            y[size_t(i)] = round_bf16(round_bf16(a * c) - round_bf16(b * s));
            y[size_t(i + d / 2)] = round_bf16(round_bf16(b * c) + round_bf16(a * s));
          }
          x = y;
        }
      }
      bf16* dst;
      if (head < nh) {
        dst = &q_out[(size_t(t) * nh + head) * d];
      } else {
        const int kvh = is_v ? head - nh - nkv : head - nh;
        const int64_t slot = slots[size_t(t)], block = slot / block_size, off = slot % block_size;
        dst = &(is_v ? v_cache : k_cache)[size_t(((block * nkv + kvh) * block_size + off) * d)];
      }
      for (int i = 0; i < d; ++i) dst[i] = float_to_bf16(x[size_t(i)]);
    }
  }
}

}  // namespace striker::cuda
