#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>

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

TEST(Sampler, CounterUniformDependsOnEveryInputOnly) {
  EXPECT_EQ(counter_uniform(1, 2, 3), counter_uniform(1, 2, 3));
  EXPECT_NE(counter_uniform(1, 2, 3), counter_uniform(2, 2, 3));
  EXPECT_NE(counter_uniform(1, 2, 3), counter_uniform(1, 3, 3));
  EXPECT_NE(counter_uniform(1, 2, 3), counter_uniform(1, 2, 4));
  double lo = 1, hi = 0, sum = 0;
  for (int i = 0; i < 10000; ++i) {
    double u = counter_uniform(77, 0, uint64_t(i));
    lo = std::min(lo, u);
    hi = std::max(hi, u);
    sum += u;
  }
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
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
