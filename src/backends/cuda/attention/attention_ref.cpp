#include <algorithm>
#include <cmath>
#include <limits>

#include "backends/cuda/attention/attention.h"

namespace striker::cuda {

void paged_attention_ref(const std::vector<bf16>& q, const std::vector<bf16>& k_cache,
                         const std::vector<bf16>& v_cache, const std::vector<float>* sinks,
                         const AttentionShape& s, const std::vector<int32_t>& positions,
                         const std::vector<int32_t>& table_offset, const std::vector<int32_t>& block_tables,
                         std::vector<bf16>& out) {
  const int d = s.head_dim, nh = s.n_heads, nkv = s.n_kv_heads, G = nh / nkv, B = s.block_size;
  const size_t NQ = positions.size();
  out.resize(NQ * size_t(nh) * d);
  std::vector<double> scores, acc(static_cast<size_t>(d));
  for (size_t i = 0; i < NQ; ++i) {
    const int p = positions[i];
    const int lo = s.window > 0 ? std::max(0, p - s.window + 1) : 0;
    for (int h = 0; h < nh; ++h) {
      const int kvh = h / G;
      const bf16* qh = &q[(i * nh + size_t(h)) * d];
      scores.clear();
      double m = sinks ? double((*sinks)[size_t(h)]) : -std::numeric_limits<double>::infinity();
      for (int j = lo; j <= p; ++j) {
        const int64_t blk = block_tables[size_t(table_offset[i] + j / B)];
        const bf16* k = &k_cache[size_t(((blk * nkv + kvh) * B + j % B) * d)];
        double dot = 0;
        for (int c = 0; c < d; ++c) dot += double(bf16_to_float(qh[c])) * bf16_to_float(k[c]);
        const double sc = dot / std::sqrt(double(d));
        scores.push_back(sc);
        m = std::max(m, sc);
      }
      double denom = sinks ? std::exp(double((*sinks)[size_t(h)]) - m) : 0.0;
      for (double sc : scores) denom += std::exp(sc - m);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int j = lo; j <= p; ++j) {
        const int64_t blk = block_tables[size_t(table_offset[i] + j / B)];
        const bf16* v = &v_cache[size_t(((blk * nkv + kvh) * B + j % B) * d)];
        const double pj = std::exp(scores[size_t(j - lo)] - m) / denom;
        for (int c = 0; c < d; ++c) acc[size_t(c)] += pj * bf16_to_float(v[c]);
      }
      for (int c = 0; c < d; ++c) out[(i * nh + size_t(h)) * d + size_t(c)] = float_to_bf16(float(acc[size_t(c)]));
    }
  }
}

}  // namespace striker::cuda
