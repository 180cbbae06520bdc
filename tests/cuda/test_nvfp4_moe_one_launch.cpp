// The one-launch MoE of a one-token NVFP4 step (nvfp4_moe_one_launch.cu) against the two launches it
// replaces (nvfp4_moe_gate_up, then nvfp4_moe_down_combine's one-token kernel): the same bits of h, of
// every act row and of the shared expert's act, and within tolerance of moe_float_ref. Its CTAs wait for
// each other through counters that each launch advances by a fixed count, so the check runs several
// tokens in a row on one set of counters and then reads the counters back.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "backends/cuda/nvfp4/nvfp4_moe.h"
#include "cuda_test_util.h"
#include "moe_grouped_test_util.h"
#include "nvfp4_test_util.h"

namespace striker::cuda::testing {
namespace {

size_t differing_bits(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  size_t bad = a.size() == b.size() ? 0 : std::max(a.size(), b.size());
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) bad += a[i].bits != b[i].bits;
  return bad;
}

size_t nans(const std::vector<bf16>& v) {
  size_t n = 0;
  for (bf16 x : v) n += std::isnan(bf16_to_float(x));
  return n;
}

TEST(CudaNvfp4MoeOneLaunch, OneTokenHasTheTwoLaunchesBits) {
  std::mt19937 rng(68);
  const int E = 16, H = 2048, I = 512, K = 6, kTokens = 5;
  const ScaledNvfp4Experts w(rng, E, H, I), sw(rng, 1, H, I);  // the routed experts; the shared one
  const Nvfp4Shared sh{sw.ng.view().m, sw.nu.view().m, sw.nd.view().m, sw.s2g[0], sw.s2u[0], sw.s2d[0], I};
  const Nvfp4Stack gs = w.ng.view(), ups = w.nu.view(), ds = w.nd.view();
  ASSERT_TRUE(nvfp4_moe_one_launch_fits(1, H, I, K, &sh));

  DeviceBuffer<unsigned long long> d_sync{size_t(kNvfp4MoeSyncWords)};
  STRIKER_CUDA_CHECK(cudaMemset(d_sync.get(), 0, size_t(kNvfp4MoeSyncWords) * sizeof(unsigned long long)));
  for (int token = 0; token < kTokens; ++token) {
    SCOPED_TRACE("token " + std::to_string(token));
    auto x = random_bf16(rng, size_t(H)), h0 = random_bf16(rng, size_t(H));
    std::vector<int32_t> ids;
    std::vector<float> tw;
    random_topk(rng, 1, K, E, ids, tw);
    DeviceBuffer<bf16> d_x(x);
    DeviceBuffer<int32_t> d_ids(ids);
    DeviceBuffer<float> d_tw(tw);
    // The two launches, as the backend runs them at one token (the down rows requested into L2).
    DeviceBuffer<bf16> h_two(h0), act_two(size_t(K) * I), sact_two{size_t(I)};
    act_two.poison();
    sact_two.poison();
    const Nvfp4Matrix down_rows = ds.m;
    nvfp4_moe_gate_up(d_x.get(), 1, H, gs, ups, I, d_ids.get(), K, act_two.get(), &sh, sact_two.get(), nullptr,
                      &down_rows);
    nvfp4_moe_down_combine(act_two.get(), 1, K, ds, I, H, d_ids.get(), d_tw.get(), &sh, sact_two.get(), nullptr,
                           h_two.get(), nullptr);
    // The one launch, every buffer it writes poisoned first.
    DeviceBuffer<bf16> h_one(h0), act_one(size_t(K) * I), sact_one{size_t(I)}, ys{size_t(K + 1) * H};
    act_one.poison();
    sact_one.poison();
    ys.poison();
    nvfp4_moe_one_launch(d_x.get(), H, gs, ups, ds, I, d_ids.get(), d_tw.get(), K, sh, act_one.get(), sact_one.get(),
                         ys.get(), d_sync.get(), h_one.get(), nullptr);
    STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
    const auto h1 = h_one.download(), h2 = h_two.download();
    EXPECT_EQ(differing_bits(h1, h2), 0u) << "h differs from the two launches'";
    EXPECT_EQ(differing_bits(act_one.download(), act_two.download()), 0u) << "routed act rows differ";
    EXPECT_EQ(differing_bits(sact_one.download(), sact_two.download()), 0u) << "shared act differs";
    EXPECT_EQ(nans(h1), 0u);
    std::vector<bf16> h_ref = h0;
    moe_float_ref(x, 1, H, I, I, MoeFloatWeights{&w.fg, &w.fu, &w.fd, &sw.fg, &sw.fu, &sw.fd}, ids, tw, K, h_ref);
    const auto c = compare(h1, h_ref, 2 * kBf16Rtol, kBf16Atol);
    EXPECT_TRUE(c.ok()) << c.describe();
  }
  // Each launch adds its grid's width (32 CTAs) to every slot's counter (words 0..K) and K + 1 to every
  // row block's (words 9.., after the 9 slot words of top-8 + the shared expert).
  const auto counters = d_sync.download();
  const uint64_t launches = kTokens;
  for (int s = 0; s <= K; ++s) EXPECT_EQ(counters[size_t(s)], launches * (I / 16)) << "slot " << s;
  for (int b = 0; b < I / 16; ++b) EXPECT_EQ(counters[size_t(9 + b)], launches * (K + 1)) << "row block " << b;
}

TEST(CudaNvfp4MoeOneLaunch, TakesOnlyTheOneTokenShapeItIsBuiltFor) {
  const Nvfp4Shared sh512{{}, {}, {}, 1.f, 1.f, 1.f, 512}, sh256{{}, {}, {}, 1.f, 1.f, 1.f, 256};
  EXPECT_TRUE(nvfp4_moe_one_launch_fits(1, 2048, 512, 6, &sh512));
  EXPECT_FALSE(nvfp4_moe_one_launch_fits(2, 2048, 512, 6, &sh512));      // two tokens
  EXPECT_FALSE(nvfp4_moe_one_launch_fits(1, 2048, 512, 6, nullptr));     // no NVFP4 shared expert
  EXPECT_FALSE(nvfp4_moe_one_launch_fits(1, 2048, 512, 6, &sh256));      // shared inter != inter
  EXPECT_FALSE(nvfp4_moe_one_launch_fits(1, 1024, 512, 6, &sh512));      // not one pair of chunks per lane
  EXPECT_FALSE(nvfp4_moe_one_launch_fits(1, 2048, 512, 9, &sh512));      // top-9
  const Nvfp4Stack none{};
  EXPECT_THROW(nvfp4_moe_one_launch(nullptr, 2048, none, none, none, 512, nullptr, nullptr, 6, sh256, nullptr, nullptr,
                                    nullptr, nullptr, nullptr, nullptr),
               Error);
}

}  // namespace
}  // namespace striker::cuda::testing
