#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace striker {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool in_vocab(int32_t id, size_t vocab) { return id >= 0 && size_t(id) < vocab; }

void apply_penalties(std::vector<float>& x, const SamplingParams& p, const PenaltyState& st) {
  const size_t V = x.size();
  if (p.repetition_penalty != 1.0f) {
    // vLLM: every token seen in prompt or output once; positive logits shrink, negative grow.
    auto penalize = [&](int32_t id) {
      if (!in_vocab(id, V)) return;
      x[size_t(id)] = x[size_t(id)] > 0 ? x[size_t(id)] / p.repetition_penalty : x[size_t(id)] * p.repetition_penalty;
    };
    for (int32_t id : st.prompt_tokens()) penalize(id);
    for (const auto& [id, n] : st.output_counts())
      if (!st.prompt_tokens().count(id)) penalize(id);
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    for (const auto& [id, n] : st.output_counts()) {
      if (!in_vocab(id, V)) continue;
      x[size_t(id)] -= p.frequency_penalty * float(n) + p.presence_penalty;
    }
  }
}

int32_t argmax(const std::vector<float>& x) {
  size_t best = 0;
  for (size_t i = 1; i < x.size(); ++i)
    if (x[i] > x[best]) best = i;
  return int32_t(best);
}

}  // namespace

PenaltyState::PenaltyState(const SamplingParams& params, std::span<const int32_t> prompt) {
  if (params.repetition_penalty != 1.0f) prompt_tokens_.insert(prompt.begin(), prompt.end());
}

void PenaltyState::add_output(int32_t token) { ++output_counts_[token]; }

uint64_t mix_seed(uint64_t a, uint64_t b) { return splitmix(splitmix(a) ^ (b + 0x632BE59BD9B4E019ull)); }

double counter_uniform(uint64_t seed, uint64_t choice, uint64_t step) {
  const uint64_t x = splitmix(mix_seed(mix_seed(seed, choice), step));
  return double(x >> 11) * 0x1.0p-53;
}

int32_t sample_token(std::span<const float> logits, const SampleContext& ctx, std::vector<float>& x) {
  const SamplingParams& p = *ctx.params;
  const size_t V = logits.size();
  x.assign(logits.begin(), logits.end());
  for (int32_t id : ctx.suppressed)
    if (in_vocab(id, V)) x[size_t(id)] = kNegInf;
  for (const auto& [id, bias] : p.logit_bias)
    if (in_vocab(id, V)) x[size_t(id)] += bias;
  if (ctx.penalties) apply_penalties(x, p, *ctx.penalties);

  if (p.temperature < 1e-5f) return argmax(x);

  // Unnormalised probabilities at temperature T (x becomes p_i * sum).
  const float inv_t = 1.0f / p.temperature;
  const float m = *std::max_element(x.begin(), x.end());
  if (!std::isfinite(m)) return argmax(x);  // everything masked: nothing to draw from
  for (float& v : x) v = std::exp((v - m) * inv_t);
  // min_p: drop tokens below min_p times the best token's probability (best is exp(0) = 1).
  std::vector<int32_t> cand;
  cand.reserve(V);
  const float floor_p = p.min_p > 0 ? p.min_p : 0.0f;
  for (size_t i = 0; i < V; ++i)
    if (x[i] > 0 && x[i] >= floor_p) cand.push_back(int32_t(i));

  auto better = [&](int32_t a, int32_t b) { return x[size_t(a)] != x[size_t(b)] ? x[size_t(a)] > x[size_t(b)] : a < b; };
  bool sorted = false;
  if (p.top_k > 0 && size_t(p.top_k) < cand.size()) {
    std::nth_element(cand.begin(), cand.begin() + p.top_k, cand.end(), better);
    cand.resize(size_t(p.top_k));
    std::sort(cand.begin(), cand.end(), better);
    sorted = true;
  }
  if (p.top_p < 1.0f) {
    double total = 0;
    for (int32_t id : cand) total += x[size_t(id)];
    // Sort only as deep as the nucleus reaches: grow the sorted prefix until it covers top_p.
    size_t depth = sorted ? cand.size() : std::min<size_t>(64, cand.size());
    for (;;) {
      if (!sorted) std::partial_sort(cand.begin(), cand.begin() + depth, cand.end(), better);
      double cum = 0;
      size_t keep = 0;
      while (keep < depth && cum < double(p.top_p) * total) cum += x[size_t(cand[keep++])];
      if (cum >= double(p.top_p) * total || depth == cand.size()) {
        cand.resize(std::max<size_t>(keep, 1));
        break;
      }
      depth = std::min(cand.size(), depth * 4);
    }
  }

  double total = 0;
  for (int32_t id : cand) total += x[size_t(id)];
  const double target = counter_uniform(ctx.seed, uint64_t(ctx.choice), uint64_t(ctx.step)) * total;
  double acc = 0;
  for (int32_t id : cand) {
    acc += x[size_t(id)];
    if (acc > target) return id;
  }
  return cand.back();
}

TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int32_t top_n) {
  const size_t V = logits.size();
  const float m = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float v : logits) sum += std::exp(double(v) - m);
  const double lse = double(m) + std::log(sum);
  TokenLogprob out;
  out.token = token;
  out.logprob = in_vocab(token, V) ? float(double(logits[size_t(token)]) - lse) : kNegInf;
  const size_t n = std::min<size_t>(size_t(std::max(top_n, 0)), V);
  if (n > 0) {
    std::vector<int32_t> ids(V);
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
      return logits[size_t(a)] != logits[size_t(b)] ? logits[size_t(a)] > logits[size_t(b)] : a < b;
    });
    for (size_t i = 0; i < n; ++i) out.top.emplace_back(ids[i], float(double(logits[size_t(ids[i])]) - lse));
  }
  return out;
}

}  // namespace striker
