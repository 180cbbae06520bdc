// Router top-K and the routed + shared expert block against the CPU references.
#include <gtest/gtest.h>

#include <set>

#include "backends/cuda/gemv.h"
#include "backends/cuda/moe.h"
#include "backends/cuda/rmsnorm.h"
#include "backends/cuda/router.h"
#include "bit_compare.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {
namespace {

TEST(CudaRouter, TopKAndWeightsMatchReference) {
  std::mt19937 rng(41);
  for (bool f32 : {false, true}) {
    SCOPED_TRACE(f32 ? "f32 weights" : "bf16 weights");
    const RouterShape rs{2048, 256, 6, true, 2.5f};
    const int T = 11;  // more than one 8-token pass
    auto x = random_bf16(rng, size_t(T) * rs.hidden);
    auto wb = random_bf16(rng, size_t(rs.n_experts) * rs.hidden, 0.03f);
    auto wf = f32 ? random_f32(rng, wb.size(), 0.f, 0.03f) : to_float(wb);
    auto bias = random_f32(rng, size_t(rs.n_experts), 0.f, 0.05f);
    std::vector<int32_t> ref_ids;
    std::vector<float> ref_w;
    router_topk_ref(x, T, rs, wf, &bias, ref_ids, ref_w);
    DeviceBuffer<bf16> d_x(x), d_wb(wb);
    DeviceBuffer<float> d_wf(wf), d_bias(bias), d_w(size_t(T) * rs.top_k);
    DeviceBuffer<int32_t> d_ids(size_t(T) * rs.top_k);
    DeviceBuffer<float> d_logits(size_t(T) * rs.n_experts);
    d_w.poison();
    d_ids.poison();
    router_topk(d_x.get(), T, rs, f32 ? nullptr : d_wb.get(), f32 ? d_wf.get() : nullptr, d_bias.get(), d_logits.get(), d_ids.get(),
                d_w.get(), nullptr);
    const auto ids = d_ids.download();
    const auto w = d_w.download();
    EXPECT_EQ(ids, ref_ids);
    const auto c = compare(w, ref_w, 1e-5, 1e-6);
    EXPECT_TRUE(c.ok()) << c.describe();
    double sum = 0;
    for (int k = 0; k < rs.top_k; ++k) sum += w[size_t(k)];
    EXPECT_NEAR(sum, 2.5, 1e-4);  // normalised weights times rsf
  }
}

TEST(CudaRouter, TiesGoToTheLowerExpert) {
  const RouterShape rs{64, 32, 4, true, 1.f};
  std::vector<bf16> x(64, float_to_bf16(1.f));
  std::vector<float> w(size_t(32) * 64, 0.f);  // every logit 0: all scores tie at 0.5
  DeviceBuffer<bf16> d_x(x);
  DeviceBuffer<float> d_wf(w), d_w(4);
  DeviceBuffer<int32_t> d_ids(4);
  DeviceBuffer<float> d_logits(32);
  d_ids.poison();
  router_topk(d_x.get(), 1, rs, nullptr, d_wf.get(), nullptr, d_logits.get(), d_ids.get(), d_w.get(), nullptr);
  EXPECT_EQ(d_ids.download(), (std::vector<int32_t>{0, 1, 2, 3}));
}

// DecodeTweaks::early_weights and fused_norm on the router: rmsnorm(h) then the plain router is
// the reference; every variant must give the same logits, ids and weights bit for bit, and the
// fused ones must write x = rmsnorm(h) bit for bit (the MoE kernels read it). E = 37: the last
// block has an idle warp (it must still join the norm's barriers); hidden 2072: not a multiple of
// the 256-thread layout. T = 11: a second 8-token pass.
TEST(CudaRouter, EarlyWeightsAndFusedNormAreBitIdentical) {
  std::mt19937 rng(43);
  const float eps = 1e-6f;
  for (bool f32 : {false, true})
    for (auto [hidden, E] : {std::pair{2048, 256}, {2072, 37}}) {
      const RouterShape rs{hidden, E, 6, true, 2.5f};
      auto wb = random_bf16(rng, size_t(E) * hidden, 0.03f);
      auto wf = random_f32(rng, wb.size(), 0.f, 0.03f);
      auto bias = random_f32(rng, size_t(E), 0.f, 0.05f);
      auto gamma = random_f32(rng, size_t(hidden), 1.f, 0.3f);
      DeviceBuffer<bf16> d_wb(wb);
      DeviceBuffer<float> d_wf(wf), d_bias(bias), d_gamma(gamma);
      for (int T : {1, 2, 3, 4, 5, 6, 7, 8, 11}) {
        SCOPED_TRACE(std::string(f32 ? "f32" : "bf16") + " weights, hidden=" + std::to_string(hidden) +
                     " E=" + std::to_string(E) + " T=" + std::to_string(T));
        auto h = random_bf16(rng, size_t(T) * hidden, 3.f);
        DeviceBuffer<bf16> d_h(h), d_x(h.size()), x_out(h.size());
        const size_t nk = size_t(T) * rs.top_k;
        DeviceBuffer<float> lg_old(size_t(T) * E), lg_new(size_t(T) * E), w_old(nk), w_new(nk);
        DeviceBuffer<int32_t> id_old(nk), id_new(nk);
        for (auto* b : {&lg_old, &w_old}) b->poison();
        id_old.poison();
        d_x.poison();
        rmsnorm(d_h.get(), d_gamma.get(), d_x.get(), T, hidden, eps, nullptr);
        router_topk(d_x.get(), T, rs, f32 ? nullptr : d_wb.get(), f32 ? d_wf.get() : nullptr, d_bias.get(),
                    lg_old.get(), id_old.get(), w_old.get(), nullptr);
        const auto x_want = d_x.download();
        const auto lg_want = lg_old.download(), w_want = w_old.download();
        const auto id_want = id_old.download();
        for (bool early : {false, true})
          for (bool fused : {false, true}) {
            if (!early && !fused) continue;
            const std::string v = std::string(early ? "early" : "") + (fused ? " fused" : "");
            for (auto* b : {&lg_new, &w_new}) b->poison();
            id_new.poison();
            x_out.poison();
            const FusedRmsNorm norm{d_gamma.get(), eps, x_out.get()};
            router_topk(fused ? d_h.get() : d_x.get(), T, rs, f32 ? nullptr : d_wb.get(), f32 ? d_wf.get() : nullptr,
                        d_bias.get(), lg_new.get(), id_new.get(), w_new.get(), nullptr, early, fused ? &norm : nullptr);
            std::string why = bit_mismatch(lg_new.download(), lg_want, v + " logits");
            EXPECT_TRUE(why.empty()) << why;
            why = bit_mismatch(id_new.download(), id_want, v + " ids");
            EXPECT_TRUE(why.empty()) << why;
            why = bit_mismatch(w_new.download(), w_want, v + " weights");
            EXPECT_TRUE(why.empty()) << why;
            if (fused) {
              why = bit_mismatch(x_out.download(), x_want, v + " x");
              EXPECT_TRUE(why.empty()) << why;
            }
          }
      }
    }
}

// DecodeTweaks::early_weights on the selected-experts kernels (the shared expert's rows load
// early): act, shared act and h bit-identical to the kernels without it, T = 1..8. Shared widths
// 40 (fewer chunks than lanes) and 520 (more than two per lane), neither a multiple of the tile.
TEST(CudaMoe, EarlyWeightsAreBitIdentical) {
  std::mt19937 rng(45);
  const int E = 16, H = 264, I = 72, K = 6;
  for (int Is : {40, 520}) {
    auto wg = random_bf16(rng, size_t(E) * I * H, 0.06f), wu = random_bf16(rng, wg.size(), 0.06f);
    auto wd = random_bf16(rng, size_t(E) * H * I, 0.1f);
    auto sg = random_bf16(rng, size_t(Is) * H, 0.06f), su = random_bf16(rng, sg.size(), 0.06f);
    auto sd = random_bf16(rng, size_t(H) * Is, 0.1f);
    DeviceBuffer<bf16> d_wg(wg), d_wu(wu), d_wd(wd), d_sg(sg), d_su(su), d_sd(sd);
    for (int T = 1; T <= 8; ++T) {
      SCOPED_TRACE("Is=" + std::to_string(Is) + " T=" + std::to_string(T));
      std::vector<int32_t> ids;
      std::vector<float> tw;
      std::uniform_real_distribution<float> uw(0.1f, 1.f);
      for (int t = 0; t < T; ++t) {
        std::set<int32_t> chosen;
        while (chosen.size() < size_t(K)) chosen.insert(int32_t(rng() % E));
        for (int e : chosen) {
          ids.push_back(e);
          tw.push_back(uw(rng));
        }
      }
      auto x = random_bf16(rng, size_t(T) * H), h = random_bf16(rng, size_t(T) * H);
      DeviceBuffer<bf16> d_x(x), h_old(h), h_new(h);
      DeviceBuffer<bf16> a_old(size_t(T) * K * I), a_new(a_old.size()), s_old(size_t(T) * Is), s_new(s_old.size());
      DeviceBuffer<int32_t> d_ids(ids);
      DeviceBuffer<float> d_tw(tw);
      for (auto* b : {&a_old, &a_new, &s_old, &s_new}) b->poison();
      for (bool early : {false, true}) {
        bf16* act = early ? a_new.get() : a_old.get();
        bf16* sact = early ? s_new.get() : s_old.get();
        moe_gate_up(d_x.get(), T, H, d_wg.get(), d_wu.get(), I, d_ids.get(), K, act, d_sg.get(), d_su.get(), Is, sact,
                    nullptr, early);
        moe_down_combine(act, T, K, d_wd.get(), I, H, d_ids.get(), d_tw.get(), sact, d_sd.get(), Is,
                         early ? h_new.get() : h_old.get(), nullptr, early);
      }
      std::string why = bit_mismatch(a_new.download(), a_old.download(), "routed act");
      EXPECT_TRUE(why.empty()) << why;
      why = bit_mismatch(s_new.download(), s_old.download(), "shared act");
      EXPECT_TRUE(why.empty()) << why;
      why = bit_mismatch(h_new.download(), h_old.download(), "h");
      EXPECT_TRUE(why.empty()) << why;
    }
  }
}

TEST(CudaMoe, RoutedPlusSharedExpertsUpdateResidual) {
  std::mt19937 rng(42);
  const int E = 16, H = 264, I = 72, Is = 40, K = 6, T = 3;  // shared width differs from routed
  auto x = random_bf16(rng, size_t(T) * H);
  auto wg = random_bf16(rng, size_t(E) * I * H, 0.06f), wu = random_bf16(rng, wg.size(), 0.06f);
  auto wd = random_bf16(rng, size_t(E) * H * I, 0.1f);
  auto sg = random_bf16(rng, size_t(Is) * H, 0.06f), su = random_bf16(rng, sg.size(), 0.06f);
  auto sd = random_bf16(rng, size_t(H) * Is, 0.1f);
  std::vector<int32_t> ids;
  std::vector<float> tw;
  std::uniform_real_distribution<float> uw(0.1f, 1.f);
  for (int t = 0; t < T; ++t) {
    std::set<int32_t> chosen;
    while (chosen.size() < size_t(K)) chosen.insert(int32_t(rng() % E));
    for (int e : chosen) {
      ids.push_back(e);
      tw.push_back(uw(rng));
    }
  }
  auto h = random_bf16(rng, size_t(T) * H);
  std::vector<bf16> h_ref = h;
  moe_ref(x, T, H, I, Is, MoeRefWeights{&wg, &wu, &wd, &sg, &su, &sd}, ids, tw, K, h_ref);

  DeviceBuffer<bf16> d_x(x), d_wg(wg), d_wu(wu), d_wd(wd), d_sg(sg), d_su(su), d_sd(sd), d_h(h);
  DeviceBuffer<bf16> d_act(size_t(T) * K * I), d_sact(size_t(T) * Is);
  DeviceBuffer<int32_t> d_ids(ids);
  DeviceBuffer<float> d_tw(tw);
  d_act.poison();
  d_sact.poison();
  moe_gate_up(d_x.get(), T, H, d_wg.get(), d_wu.get(), I, d_ids.get(), K, d_act.get(), d_sg.get(), d_su.get(), Is,
              d_sact.get(), nullptr);
  moe_down_combine(d_act.get(), T, K, d_wd.get(), I, H, d_ids.get(), d_tw.get(), d_sact.get(), d_sd.get(), Is,
                   d_h.get(), nullptr);
  const auto c = compare(d_h.download(), h_ref, 2 * kBf16Rtol, kBf16Atol);
  EXPECT_TRUE(c.ok()) << c.describe();
}

}  // namespace
}  // namespace striker::cuda::testing

#include <algorithm>
#include <numeric>

namespace striker::cuda::testing {
namespace {

TEST(CudaMoe, CombineOfExpertSortedRowsMatchesReference) {
  std::mt19937 rng(44);
  const int T = 13, K = 6, H = 264;
  auto ys = random_bf16(rng, size_t(T) * K * H), ysh = random_bf16(rng, size_t(T) * H);
  auto h = random_bf16(rng, size_t(T) * H);
  auto tw = random_f32(rng, size_t(T) * K, 0.4f, 0.2f);
  std::vector<int32_t> inv(size_t(T) * K);
  std::iota(inv.begin(), inv.end(), 0);
  std::shuffle(inv.begin(), inv.end(), rng);
  for (bool shared : {true, false}) {
    std::vector<float> ref(size_t(T) * H);
    for (int t = 0; t < T; ++t)
      for (int o = 0; o < H; ++o) {
        double sum = 0;
        for (int k = 0; k < K; ++k)
          sum += double(tw[size_t(t) * K + k]) * bf16_to_float(ys[size_t(inv[size_t(t) * K + k]) * H + o]);
        float y = round_bf16(float(sum));
        if (shared) y = round_bf16(y + bf16_to_float(ysh[size_t(t) * H + o]));
        ref[size_t(t) * H + o] = round_bf16(bf16_to_float(h[size_t(t) * H + o]) + y);
      }
    DeviceBuffer<bf16> d_ys(ys), d_ysh(ysh), d_h(h);
    DeviceBuffer<int32_t> d_inv(inv);
    DeviceBuffer<float> d_tw(tw);
    moe_combine_sorted(d_ys.get(), d_inv.get(), d_tw.get(), shared ? d_ysh.get() : nullptr, T, K, H, d_h.get(),
                       nullptr);
    const auto c = compare(to_float(d_h.download()), ref, kBf16Rtol, kBf16Atol);
    EXPECT_TRUE(c.ok()) << (shared ? "with shared " : "routed only ") << c.describe();
  }
}

}  // namespace
}  // namespace striker::cuda::testing
