#include <cmath>
#include <limits>

#include "backends/cuda/moe/router.h"

namespace striker::cuda {

std::vector<double> router_logits_ref(const std::vector<bf16>& x, int T, int hidden, int n_experts,
                                      const std::vector<float>& weight) {
  std::vector<double> logits(size_t(T) * n_experts);
  for (int t = 0; t < T; ++t)
    for (int e = 0; e < n_experts; ++e) {
      double r = 0;
      for (int i = 0; i < hidden; ++i)
        r += double(bf16_to_float(x[size_t(t) * hidden + i])) * weight[size_t(e) * hidden + i];
      logits[size_t(t) * n_experts + e] = r;
    }
  return logits;
}

void router_select_ref(const std::vector<double>& logits, int T, const RouterShape& rs, const std::vector<float>* bias,
                       std::vector<int32_t>& topk_ids, std::vector<float>& topk_w) {
  const int E = rs.n_experts, K = rs.top_k;
  topk_ids.assign(size_t(T) * K, -1);
  topk_w.assign(size_t(T) * K, 0.f);
  std::vector<float> score(static_cast<size_t>(E)), sel(static_cast<size_t>(E));
  for (int t = 0; t < T; ++t) {
    for (int e = 0; e < E; ++e) {
      score[size_t(e)] = float(1.0 / (1.0 + std::exp(-logits[size_t(t) * E + e])));
      sel[size_t(e)] = score[size_t(e)] + (bias ? (*bias)[size_t(e)] : 0.f);
    }
    double sum = 0;
    for (int k = 0; k < K; ++k) {
      int best = -1;
      for (int e = 0; e < E; ++e)
        if (best < 0 || sel[size_t(e)] > sel[size_t(best)]) best = e;
      topk_ids[size_t(t) * K + k] = best;
      sum += score[size_t(best)];
      sel[size_t(best)] = -std::numeric_limits<float>::infinity();
    }
    for (int k = 0; k < K; ++k) {
      const float s = score[size_t(topk_ids[size_t(t) * K + k])];
      topk_w[size_t(t) * K + k] = float((rs.norm_topk_prob ? s / (sum + 1e-20) : s) * rs.routed_scaling_factor);
    }
  }
}

void router_topk_ref(const std::vector<bf16>& x, int T, const RouterShape& rs, const std::vector<float>& weight,
                     const std::vector<float>* bias, std::vector<int32_t>& topk_ids, std::vector<float>& topk_w) {
  router_select_ref(router_logits_ref(x, T, rs.hidden, rs.n_experts, weight), T, rs, bias, topk_ids, topk_w);
}

}  // namespace striker::cuda
