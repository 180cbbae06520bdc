// The individual ops against hand-computed FLINT.md §4 values.
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cpu/ops_attention.h"
#include "backends/cpu/ops_linear.h"
#include "backends/cpu/ops_moe.h"
#include "backends/cpu/ops_norm.h"
#include "backends/cpu/ops_rope.h"
#include "core/bf16.h"
#include "core/thread_pool.h"

namespace striker::cpu {
namespace {

TEST(CpuOps, RmsnormRoundsTwice) {
  const float x[4] = {1.0f, -2.0f, 3.0f, 0.5f}, w[4] = {1.0f, 0.5f, 2.0f, 1.5f};
  float y[4];
  rmsnorm(x, w, 4, 1e-6f, y);
  const double r = 1.0 / std::sqrt((1.0 + 4.0 + 9.0 + 0.25) / 4.0 + 1e-6);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], round_bf16(round_bf16(float(x[i] * float(r))) * w[i])) << i;
}

TEST(CpuOps, RopeAtPositionZeroIsIdentityAndAnglesAreAccurateFarOut) {
  std::vector<float> x = {0.5f, -1.25f, 2.0f, 3.0f, -0.75f, 1.5f, 0.125f, -2.5f};
  auto copy = x;
  apply_rope(x.data(), 1, 8, rope_angles(0, 8, 10000.0f));
  EXPECT_EQ(x, copy);
  // p = 262143: φ is the fp32 product, cos/sin of it must be accurate (then bf16).
  const RopeAngles a = rope_angles(262143, 128, 10000.0f);
  for (int i = 0; i < 64; ++i) {
    const float inv = float(std::pow(10000.0, -2.0 * i / 128.0));
    const long double phi = (long double)(262143.0f * inv);
    EXPECT_NEAR(a.cos[size_t(i)], double(cosl(phi)), 0.004) << i;  // within one bf16 half-ulp of |v|<=1
    EXPECT_NEAR(a.sin[size_t(i)], double(sinl(phi)), 0.004) << i;
    EXPECT_EQ(a.cos[size_t(i)], round_bf16(a.cos[size_t(i)]));
  }
}

TEST(CpuOps, DotAccumulatesInFp32) {
  std::vector<float> a(100), b(100);
  double exact = 0;
  for (int i = 0; i < 100; ++i) {
    a[size_t(i)] = float(i % 7) - 3.0f;
    b[size_t(i)] = 0.25f * float(i % 5);
    exact += double(a[size_t(i)]) * b[size_t(i)];
  }
  EXPECT_EQ(double(dot(a.data(), b.data(), 100)), exact);  // small integers: exact in fp32
}

TEST(CpuOps, AttentionOverOneKeyWeighsItsValueAgainstTheSink) {
  FlintConfig c;
  c.num_hidden_layers = 1;
  c.layer_types = {LayerType::Full};
  c.num_key_value_heads = 1;
  c.head_dim = 4;
  KvCache cache(c);
  cache.allocate({4, 1, 0});
  const std::vector<int32_t> table = {0};
  const std::vector<TokenSlot> tokens = {{0, &table, &table}};
  Mat q(1, 4), k(1, 4), v(1, 4), out;
  q.data = {1.0f, 0.5f, -1.0f, 2.0f};
  k.data = {0.5f, 1.0f, 1.0f, 0.25f};
  v.data = {1.0f, -2.0f, 0.5f, 4.0f};
  const AttentionShape shape{0, false, 0, 1, 1, 4};
  write_kv(cache, shape, tokens, k, v);
  ThreadPool pool(2);
  const std::vector<float> sinks = {0.3f};
  attention(pool, cache, shape, sinks, tokens, q, out);
  const double s = (0.5 + 0.5 - 1.0 + 0.5) / 2.0, p = std::exp(s) / (std::exp(0.3) + std::exp(s));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out.data[size_t(i)], round_bf16(float(p * v.data[size_t(i)]))) << i;
}

TEST(CpuOps, TopKBreaksTiesTowardTheLowerExpert) {
  FlintConfig c;
  c.n_routed_experts = 4;
  c.num_experts_per_tok = 2;
  c.routed_scaling_factor = 2.5f;
  // Router rows 1, 2 and 3 are equal, so experts 1..3 tie; 0 is lower.
  std::vector<uint16_t> router(8);
  const float rows[4][2] = {{-1, 0}, {1, 1}, {1, 1}, {1, 1}};
  for (int e = 0; e < 4; ++e)
    for (int i = 0; i < 2; ++i) router[size_t(e * 2 + i)] = float_to_bf16(rows[e][i]).bits;
  LayerWeights lw;
  lw.router.name = "router";
  lw.router.shape = {4, 2};
  lw.router.data = reinterpret_cast<const std::byte*>(router.data());
  lw.router.nbytes = 16;
  CpuLayer layer;
  layer.w = &lw;
  layer.router_bias = {0, 0, 0, 0};
  Mat x(1, 2);
  x.data = {1.0f, 1.0f};
  ThreadPool pool(1);
  const auto routes = route(pool, x, layer, c);
  ASSERT_EQ(routes[0].experts, (std::vector<int32_t>{1, 2}));
  EXPECT_FLOAT_EQ(routes[0].weights[0], 1.25f);  // equal scores: half each, × 2.5
  // The bias changes selection but not the weights.
  layer.router_bias = {0, 0, 0, 0.5f};
  const auto biased = route(pool, x, layer, c);
  EXPECT_EQ(biased[0].experts, (std::vector<int32_t>{1, 3}));
  EXPECT_FLOAT_EQ(biased[0].weights[1], 1.25f);
}

TEST(CpuOps, ThreadPoolCoversEveryIndexOnceAndPropagatesErrors) {
  ThreadPool pool(3);
  std::vector<int> hits(1000, 0);
  pool.parallel_for(1000, 7, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[size_t(i)] += 1;
  });
  for (int h : hits) ASSERT_EQ(h, 1);
  EXPECT_THROW(pool.parallel_for(100, 1, [](int64_t b, int64_t) {
    if (b == 42) throw std::runtime_error("boom");
  }), std::runtime_error);
  pool.parallel_for(10, 1, [&](int64_t b, int64_t) { hits[size_t(b)] += 1; });  // still works
  EXPECT_EQ(hits[9], 2);
}

}  // namespace
}  // namespace striker::cpu
