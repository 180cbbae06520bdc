#include "backends/cpu/ops_moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "backends/cpu/ops_linear.h"
#include "core/bf16.h"

namespace striker::cpu {

namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace

void swiglu(ThreadPool& pool, const Mat& x, const MlpWeights& w, Mat& out) {
  Mat g, u;
  matmul(pool, x, w.gate, g, true);
  matmul(pool, x, w.up, u, true);
  for (size_t i = 0; i < g.data.size(); ++i) {
    const float gv = g.data[i];
    g.data[i] = round_bf16(round_bf16(gv * sigmoid(gv)) * u.data[i]);
  }
  matmul(pool, g, w.down, out, true);
}

std::vector<Routing> route(ThreadPool& pool, const Mat& x, const CpuLayer& layer, const FlintConfig& config) {
  Mat logits;
  matmul(pool, x, layer.w->router, logits, false);
  const int64_t n_experts = config.n_routed_experts, k = config.num_experts_per_tok;
  std::vector<Routing> routes(static_cast<size_t>(x.rows));
  std::vector<float> score(static_cast<size_t>(n_experts)), choice(static_cast<size_t>(n_experts));
  std::vector<int32_t> order(static_cast<size_t>(n_experts));
  for (int64_t t = 0; t < x.rows; ++t) {
    for (int64_t e = 0; e < n_experts; ++e) {
      score[size_t(e)] = sigmoid(logits.row(t)[e]);
      choice[size_t(e)] = score[size_t(e)] + layer.router_bias[size_t(e)];
    }
    std::iota(order.begin(), order.end(), 0);
    // Highest biased score first; equal scores keep the lower expert index first.
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return choice[size_t(a)] > choice[size_t(b)]; });
    Routing& r = routes[size_t(t)];
    r.experts.assign(order.begin(), order.begin() + k);
    std::sort(r.experts.begin(), r.experts.end());
    float sum = 0.0f;
    for (int32_t e : r.experts) sum += score[size_t(e)];
    for (int32_t e : r.experts) {
      const float s = score[size_t(e)];
      r.weights.push_back((config.norm_topk_prob ? s / (sum + 1e-20f) : s) * config.routed_scaling_factor);
    }
  }
  return routes;
}

void moe(ThreadPool& pool, const Mat& x, const CpuLayer& layer, const FlintConfig& config, Mat& out) {
  const std::vector<Routing> routes = route(pool, x, layer, config);
  const int64_t H = x.cols;
  // Which tokens chose each expert (and with which weight).
  std::vector<std::vector<std::pair<int64_t, float>>> users(static_cast<size_t>(config.n_routed_experts));
  for (int64_t t = 0; t < x.rows; ++t)
    for (size_t s = 0; s < routes[size_t(t)].experts.size(); ++s)
      users[size_t(routes[size_t(t)].experts[s])].emplace_back(t, routes[size_t(t)].weights[s]);

  // Experts run in ascending index, so every token sums its terms in the same order
  // whatever else is in the batch.
  Mat routed(x.rows, H);
  Mat xe, ye;
  for (size_t e = 0; e < users.size(); ++e) {
    if (users[e].empty()) continue;
    xe = Mat(int64_t(users[e].size()), H);
    for (size_t i = 0; i < users[e].size(); ++i)
      std::copy_n(x.row(users[e][i].first), H, xe.row(int64_t(i)));
    swiglu(pool, xe, layer.w->experts[e], ye);
    for (size_t i = 0; i < users[e].size(); ++i) {
      float* acc = routed.row(users[e][i].first);
      const float w = users[e][i].second;
      const float* y = ye.row(int64_t(i));
      for (int64_t j = 0; j < H; ++j) acc[j] += w * y[j];
    }
  }
  if (out.rows != x.rows || out.cols != H) out = Mat(x.rows, H);
  if (config.n_shared_experts > 0) {
    Mat shared;
    swiglu(pool, x, layer.w->shared, shared);
    for (size_t i = 0; i < out.data.size(); ++i) out.data[i] = round_bf16(round_bf16(routed.data[i]) + shared.data[i]);
  } else {
    for (size_t i = 0; i < out.data.size(); ++i) out.data[i] = round_bf16(routed.data[i]);
  }
}

}  // namespace striker::cpu
