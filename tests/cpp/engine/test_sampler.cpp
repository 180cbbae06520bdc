#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <cstring>
#include <random>
#include <set>

#include "backends/sample_math.h"
#include "core/thread_pool.h"
#include "engine/sampler.h"

using namespace striker;

namespace {

SampleContext ctx_for(const SamplingParams& p, uint64_t seed = 1, int64_t step = 0, const PenaltyState* st = nullptr) {
  SampleContext c;
  c.params = &p;
  c.penalties = st;
  c.seed = seed;
  c.step = step;
  return c;
}

// Frequency of each token over `draws` steps of one choice.
std::map<int32_t, double> histogram(const std::vector<float>& logits, const SamplingParams& p, int draws) {
  std::map<int32_t, double> h;
  std::vector<float> scratch;
  for (int t = 0; t < draws; ++t) h[sample_token(logits, ctx_for(p, 42, t), scratch)] += 1.0 / draws;
  return h;
}

}  // namespace

TEST(Sampler, LogitProcessingMatchesVllmOrderExactly) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  p.logit_bias = {{3, 1.0f}};
  std::vector<int32_t> prompt = {0};
  PenaltyState st(p, prompt);
  for (int32_t t : {1, 1, 3}) st.add_output(t);
  std::vector<int32_t> suppressed = {2};
  SampleContext c = ctx_for(p, 1, 0, &st);
  c.suppressed = suppressed;
  std::vector<float> out;
  process_logits(std::vector<float>{2.0f, -1.0f, 0.5f, 3.0f}, c, out);
  // 0: prompt token, positive -> 2/2. 1: output x2, negative -> -1*2 - (0.5*2 + 0.25).
  // 2: suppressed. 3: bias 3+1=4 -> 4/2 -> 2 - (0.5 + 0.25).
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[1], -3.25f);
  EXPECT_EQ(out[2], -std::numeric_limits<float>::infinity());
  EXPECT_FLOAT_EQ(out[3], 1.25f);
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  std::vector<float> scratch;
  EXPECT_EQ(sample_token(std::vector<float>{0.f, 5.f, 5.f, 1.f}, ctx_for(p), scratch), 1);
  p.logit_bias = {{3, 100.f}};
  EXPECT_EQ(sample_token(std::vector<float>{0.f, 5.f, 5.f, 1.f}, ctx_for(p), scratch), 3);
  p.logit_bias = {{1, -100.f}};
  EXPECT_EQ(sample_token(std::vector<float>{0.f, 5.f, 5.f, 1.f}, ctx_for(p), scratch), 2);
}

TEST(Sampler, TopKOneAndTinyTopPAreGreedy) {
  std::vector<float> logits = {0.1f, 0.3f, 0.2f, 0.25f};
  std::vector<float> scratch;
  for (int t = 0; t < 50; ++t) {
    SamplingParams k1;
    k1.top_k = 1;
    EXPECT_EQ(sample_token(logits, ctx_for(k1, 9, t), scratch), 1);
    SamplingParams p0;
    p0.top_p = 0.01f;
    EXPECT_EQ(sample_token(logits, ctx_for(p0, 9, t), scratch), 1);
  }
}

TEST(Sampler, DrawsFollowTheFilteredDistribution) {
  const std::vector<float> logits = {0.f, std::log(2.f), std::log(3.f), std::log(4.f)};  // 0.1 0.2 0.3 0.4
  const int n = 40000;
  const double tol = 0.012;
  SamplingParams plain;
  auto h = histogram(logits, plain, n);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(h[i], 0.1 * (i + 1), tol) << i;

  SamplingParams cold;
  cold.temperature = 0.5f;  // probabilities squared: 1 4 9 16 over 30
  h = histogram(logits, cold, n);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(h[i], double((i + 1) * (i + 1)) / 30, tol) << i;

  SamplingParams k2;
  k2.top_k = 2;
  h = histogram(logits, k2, n);
  EXPECT_EQ(h.count(0) + h.count(1), 0u);
  EXPECT_NEAR(h[3], 4.0 / 7, tol);

  SamplingParams p75;
  p75.top_p = 0.75f;  // 0.4 + 0.3 < 0.75, so 0.2 joins the nucleus
  h = histogram(logits, p75, n);
  EXPECT_EQ(h.count(0), 0u);
  EXPECT_NEAR(h[1], 2.0 / 9, tol);
  EXPECT_NEAR(h[3], 4.0 / 9, tol);

  SamplingParams mp;
  mp.min_p = 0.6f;  // keeps p >= 0.24: tokens 2 and 3
  h = histogram(logits, mp, n);
  EXPECT_EQ(h.count(0) + h.count(1), 0u);
  EXPECT_NEAR(h[2], 3.0 / 7, tol);
}

TEST(Sampler, TopPOnALargeVocabStaysInTheNucleus) {
  std::vector<float> logits(5000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float((i * 7919) % 1000) / 100.0f;
  SamplingParams p;
  p.top_p = 0.9f;
  // Brute-force nucleus: sort by probability, keep until the mass before a token reaches 0.9.
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[size_t(a)] != logits[size_t(b)] ? logits[size_t(a)] > logits[size_t(b)] : a < b;
  });
  double total = 0;
  for (float v : logits) total += std::exp(double(v) - 9.99);
  std::set<int32_t> nucleus;
  double cum = 0;
  for (int32_t id : order) {
    if (cum >= 0.9 * total) break;
    nucleus.insert(id);
    cum += std::exp(double(logits[size_t(id)]) - 9.99);
  }
  ASSERT_GT(nucleus.size(), 64u);  // deeper than the first partial sort
  std::vector<float> scratch;
  std::set<int32_t> seen;
  for (int t = 0; t < 400; ++t) {
    int32_t tok = sample_token(logits, ctx_for(p, 5, t), scratch);
    EXPECT_TRUE(nucleus.count(tok)) << tok;
    seen.insert(tok);
  }
  EXPECT_GT(seen.size(), 20u);
}

TEST(Sampler, RaceUniformDependsOnEveryInputOnly) {
  namespace sm = sample_math;
  const float u = sm::race_uniform(sm::race_key(1, 2, 3), 4);
  EXPECT_EQ(u, sm::race_uniform(sm::race_key(1, 2, 3), 4));
  EXPECT_NE(u, sm::race_uniform(sm::race_key(2, 2, 3), 4));
  EXPECT_NE(u, sm::race_uniform(sm::race_key(1, 3, 3), 4));
  EXPECT_NE(u, sm::race_uniform(sm::race_key(1, 2, 4), 4));
  EXPECT_NE(u, sm::race_uniform(sm::race_key(1, 2, 3), 5));
  double lo = 1, hi = 0, sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const double v = sm::race_uniform(sm::race_key(77, 0, 9), i);
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  EXPECT_GT(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
}

TEST(Sampler, DeterministicLogMatchesLibm) {
  namespace sm = sample_math;
  double worst = 0;
  for (float x = 1e-7f; x < 40.0f; x *= 1.0007f)
    worst = std::max(worst, std::abs(double(sm::det_log(x)) - std::log(double(x))) / std::max(1.0, std::abs(std::log(double(x)))));
  EXPECT_LT(worst, 4e-7);
}

TEST(Sampler, OrderKeyOrdersFloatsAndMergesSignedZeros) {
  namespace sm = sample_math;
  const std::vector<float> v = {-std::numeric_limits<float>::infinity(), -3e38f, -1.5f, -1e-30f, 0.0f, 1e-30f, 2.0f,
                                std::numeric_limits<float>::infinity()};
  for (size_t i = 0; i + 1 < v.size(); ++i) EXPECT_LT(sm::order_key(v[i]), sm::order_key(v[i + 1])) << i;
  EXPECT_EQ(sm::order_key(-0.0f), sm::order_key(0.0f));
  for (float f : v) EXPECT_EQ(sm::key_float(sm::order_key(f)), f);
}

TEST(Sampler, LogprobsAreLogSoftmaxOfRawLogits) {
  std::vector<float> logits = {1.f, 2.f, 3.f, 2.f};
  const double lse = std::log(std::exp(1.0) + 2 * std::exp(2.0) + std::exp(3.0));
  TokenLogprob lp = token_logprob(logits, 0, 3);
  EXPECT_EQ(lp.token, 0);
  EXPECT_NEAR(lp.logprob, 1.0 - lse, 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 2);
  EXPECT_EQ(lp.top[1].first, 1);  // tie with 3: lower id first
  EXPECT_EQ(lp.top[2].first, 3);
  EXPECT_NEAR(lp.top[0].second, 3.0 - lse, 1e-6);
  EXPECT_TRUE(token_logprob(logits, 1, 0).top.empty());
  // vLLM's rank: how many logits are >= the token's (ties count, the token itself too).
  EXPECT_EQ(token_logprob(logits, 2, 0).rank, 1);
  EXPECT_EQ(token_logprob(logits, 1, 0).rank, 3);  // 2 and 3 tie at 2.0, behind 3.0
  EXPECT_EQ(lp.rank, 4);
  logits[1] = std::numeric_limits<float>::quiet_NaN();  // a NaN logit counts for no one, and has rank 0
  EXPECT_EQ(token_logprob(logits, 3, 0).rank, 2);
  EXPECT_EQ(token_logprob(logits, 1, 0).rank, 0);
}

// A row of Flint's size, full of ties (bf16-rounded), a NaN and -inf: the chunked, pooled logprobs
// have the bits of the same call without a pool, and agree with a plain log-softmax (top ids exactly).
TEST(Sampler, LogprobsOverAPoolHaveTheBitsOfOneThread) {
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.f, 3.f);
  std::vector<float> x(151552);
  for (auto& v : x) {
    const float f = nd(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u &= 0xFFFF0000u;  // bf16: many ties
    std::memcpy(&v, &u, 4);
  }
  x[77] = std::numeric_limits<float>::quiet_NaN();
  x[1234] = -std::numeric_limits<float>::infinity();
  ThreadPool pool(4);
  for (int32_t top_n : {0, 1, 5, 20}) {
    const TokenLogprob a = token_logprob(x, 4242, top_n), b = token_logprob(x, 4242, top_n, &pool);
    EXPECT_EQ(std::memcmp(&a.logprob, &b.logprob, 4), 0) << top_n;
    EXPECT_EQ(a.rank, b.rank) << top_n;
    ASSERT_EQ(a.top.size(), size_t(top_n));
    ASSERT_EQ(b.top.size(), size_t(top_n));
    for (int j = 0; j < top_n; ++j) {
      EXPECT_EQ(a.top[size_t(j)].first, b.top[size_t(j)].first) << j;
      EXPECT_EQ(std::memcmp(&a.top[size_t(j)].second, &b.top[size_t(j)].second, 4), 0) << j;
    }
  }
  // Reference without the NaN (the NaN makes every logprob NaN, as it did before the chunks).
  x[77] = 0.f;
  float m = -INFINITY;
  for (float v : x) m = std::max(m, v);
  double sum = 0;
  for (float v : x) sum += std::exp(double(v) - m);
  const double lse = m + std::log(sum);
  std::vector<int32_t> order(x.size());
  for (size_t i = 0; i < x.size(); ++i) order[i] = int32_t(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[size_t(a)] > x[size_t(b)]; });
  const TokenLogprob c = token_logprob(x, 4242, 20, &pool);
  EXPECT_NEAR(c.logprob, double(x[4242]) - lse, 1e-5);
  EXPECT_EQ(c.rank, std::count_if(x.begin(), x.end(), [&](float v) { return v >= x[4242]; }));
  for (int j = 0; j < 20; ++j) {
    EXPECT_EQ(c.top[size_t(j)].first, order[size_t(j)]) << j;  // value desc, ties to the lower id
    EXPECT_NEAR(c.top[size_t(j)].second, double(x[size_t(order[size_t(j)])]) - lse, 1e-5) << j;
  }
  x[77] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(token_logprob(x, 4242, 0, &pool).logprob));
}

TEST(Sampler, TopPWithoutTopKMeasuresTheWholeVocabulary) {
  // Four strong tokens (0.1 .. 0.4 of their mass) among 996 weak ones: the nucleus for 0.75
  // is {3, 2, 1} only when the weak tokens count in the total.
  std::vector<float> logits(1000, 0.0f);
  for (int i = 0; i < 4; ++i) logits[size_t(i)] = std::log(float(i + 1)) + 10.0f;
  SamplingParams p;
  p.top_p = 0.75f;
  auto h = histogram(logits, p, 20000);
  EXPECT_EQ(h.count(0), 0u);
  EXPECT_NEAR(h[1], 2.0 / 9, 0.015);
  EXPECT_NEAR(h[2], 3.0 / 9, 0.015);
  EXPECT_NEAR(h[3], 4.0 / 9, 0.015);
  for (const auto& [tok, f] : h) EXPECT_LT(tok, 4);
}

namespace {

// Brute-force kept set with its normalised probabilities: sort by (logit desc, id asc), then
// min_p, top_k and the top_p walk exactly as documented in sampler.h.
std::map<int32_t, double> kept_distribution(const std::vector<float>& x, const SamplingParams& p) {
  std::vector<int32_t> order(x.size());
  for (size_t i = 0; i < x.size(); ++i) order[i] = int32_t(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return x[size_t(a)] != x[size_t(b)] ? x[size_t(a)] > x[size_t(b)] : a < b;
  });
  const double m = x[size_t(order[0])];
  std::vector<std::pair<int32_t, double>> kept;
  for (int32_t id : order) {
    const double w = std::exp((double(x[size_t(id)]) - m) / p.temperature);
    if (p.min_p > 0 && w < p.min_p * (1 - 1e-6)) break;
    kept.emplace_back(id, w);
  }
  if (p.top_k > 0 && size_t(p.top_k) < kept.size()) kept.resize(size_t(p.top_k));
  if (p.top_p < 1) {
    double total = 0;
    for (auto& [id, w] : kept) total += w;
    double cum = 0;
    size_t keep = 0;
    while (keep < kept.size() && cum < p.top_p * total) cum += kept[keep++].second;
    kept.resize(std::max<size_t>(keep, 1));
  }
  double total = 0;
  for (auto& [id, w] : kept) total += w;
  std::map<int32_t, double> dist;
  for (auto& [id, w] : kept) dist[id] = w / total;
  return dist;
}

float bf16_round(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

TEST(Sampler, RaceFrequenciesMatchTheKeptSetOnBf16Ties) {
  // bf16-rounded logits in a narrow range: many exact ties, some falling on the cuts.
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 0.6f);
  std::vector<float> x(40);
  for (auto& v : x) v = bf16_round(nd(rng));
  x[7] = x[11] = x[12] = x[30] = bf16_round(1.5f);  // a tied group at the top
  struct Case {
    float t, top_p, min_p;
    int32_t top_k;
  };
  const Case cases[] = {{1.f, 1.f, 0.f, 0}, {0.7f, 1.f, 0.f, 3}, {1.f, 1.f, 0.f, 6},  {1.3f, 0.6f, 0.f, 0},
                        {1.f, 0.3f, 0.f, 10}, {0.9f, 1.f, 0.2f, 0}, {1.f, 0.8f, 0.1f, 5}};
  const int n = 30000;
  for (const Case& c : cases) {
    SamplingParams p;
    p.temperature = c.t;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    p.top_k = c.top_k;
    const auto expect = kept_distribution(x, p);
    const auto got = histogram(x, p, n);
    const std::string what = "T=" + std::to_string(c.t) + " top_k=" + std::to_string(c.top_k) +
                             " top_p=" + std::to_string(c.top_p) + " min_p=" + std::to_string(c.min_p);
    for (const auto& [tok, f] : got) EXPECT_TRUE(expect.count(tok)) << what << ": token " << tok << " is outside the kept set";
    for (const auto& [tok, q] : expect) {
      const double f = got.count(tok) ? got.at(tok) : 0.0;
      EXPECT_NEAR(f, q, 4.5 * std::sqrt(q * (1 - q) / n) + 1e-3) << what << ": token " << tok;
    }
  }
}

TEST(Sampler, CutsBreakTiesByLowerId) {
  SamplingParams k2;
  k2.top_k = 2;  // 1 and 2 tie with 3: the two lower ids stay
  auto h = histogram({0.f, 2.f, 2.f, 2.f, 1.f}, k2, 4000);
  EXPECT_EQ(h.count(3), 0u);
  EXPECT_NEAR(h[1], 0.5, 0.04);
  EXPECT_NEAR(h[2], 0.5, 0.04);
  SamplingParams p50;
  p50.top_p = 0.5f;  // four equal tokens: 0 (mass above 0), 1 (0.25) stay; 2 (0.5) does not
  h = histogram({3.f, 3.f, 3.f, 3.f}, p50, 4000);
  EXPECT_EQ(h.count(2) + h.count(3), 0u);
  EXPECT_NEAR(h[0], 0.5, 0.04);
}

TEST(Sampler, RequestFormDrawsTheSameTokenAsTheContextForm) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> logits(3000);
  for (auto& v : logits) v = bf16_round(nd(rng));
  std::vector<float> s1, s2;
  for (int trial = 0; trial < 200; ++trial) {
    SamplingParams p;
    p.temperature = trial % 5 == 0 ? 0.f : 0.3f + float(trial % 7) * 0.2f;
    p.top_k = trial % 3 == 0 ? int32_t(1 + trial % 50) : 0;
    p.top_p = trial % 4 == 0 ? 0.5f + float(trial % 9) * 0.05f : 1.f;
    p.min_p = trial % 6 == 0 ? 0.05f : 0.f;
    p.repetition_penalty = trial % 2 ? 1.3f : 1.f;
    p.frequency_penalty = trial % 3 == 1 ? 0.5f : 0.f;
    p.presence_penalty = trial % 5 == 2 ? -0.7f : 0.f;
    if (trial % 4 == 1) p.logit_bias = {{5, 3.f}, {17, -2.f}};
    std::vector<int32_t> prompt = {3, 5, 9, 2999, 5};
    PenaltyState st(p, prompt);
    for (int32_t t : {9, 9, 42, 17}) st.add_output(t);
    std::vector<int32_t> suppressed = {1, 2};
    SampleContext c = ctx_for(p, uint64_t(trial), trial, &st);
    if (trial % 2 == 0) c.suppressed = suppressed;
    EXPECT_EQ(sample_token(logits, c, s1), sample_request(logits, make_sample_request(c), s2)) << trial;
    // The output counts travel only when a penalty reads them (they grow with the output).
    const bool counted = p.repetition_penalty != 1.f || p.frequency_penalty != 0.f || p.presence_penalty != 0.f;
    EXPECT_EQ(make_sample_request(c).output_counts.size(), counted ? 3u : 0u) << trial;
  }
}
