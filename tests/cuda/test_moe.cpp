// Router top-K and the routed + shared expert block against the CPU references.
#include <gtest/gtest.h>

#include <set>

#include "backends/cuda/elementwise/rmsnorm.h"
#include "backends/cuda/linear/gemm_lt.h"
#include "backends/cuda/linear/gemv.h"
#include "backends/cuda/moe/moe.h"
#include "backends/cuda/moe/moe_grouped.h"
#include "backends/cuda/moe/router.h"
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
    auto counter = zero_counters(kRouterSyncWords);
    d_w.poison();
    d_ids.poison();
    LtGemm lt;  // the bf16 router's batched logits
    router_topk(d_x.get(), T, rs, f32 ? nullptr : d_wb.get(), f32 ? d_wf.get() : nullptr, d_bias.get(), d_logits.get(), counter.get(), d_ids.get(),
                d_w.get(), nullptr, nullptr, &lt);
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
  auto counter = zero_counters(kRouterSyncWords);
  d_ids.poison();
  router_topk(d_x.get(), 1, rs, nullptr, d_wf.get(), nullptr, d_logits.get(), counter.get(), d_ids.get(), d_w.get(), nullptr);
  EXPECT_EQ(d_ids.download(), (std::vector<int32_t>{0, 1, 2, 3}));
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
    std::vector<bf16> ref = h;
    moe_combine_sorted_ref(ys, inv, tw, shared ? ysh : std::vector<bf16>{}, T, K, H, ref);
    DeviceBuffer<bf16> d_ys(ys), d_ysh(ysh), d_h(h);
    DeviceBuffer<int32_t> d_inv(inv);
    DeviceBuffer<float> d_tw(tw);
    moe_combine_sorted(d_ys.get(), d_inv.get(), d_tw.get(), shared ? d_ysh.get() : nullptr, T, K, H, d_h.get(),
                       nullptr);
    const auto c = compare(to_float(d_h.download()), to_float(ref), kBf16Rtol, kBf16Atol);
    EXPECT_TRUE(c.ok()) << (shared ? "with shared " : "routed only ") << c.describe();
  }
}

// The combine with the next layer's input norm in its pass (prefill): h bit for bit as the plain
// combine, x bit for bit as the rmsnorm kernel on that h, and both against the CPU references
// (combine within bf16 rounding of the double sum, x within bf16 tolerance), outputs poisoned.
// 9 and 37 tokens (the first step above decode sizes, and no multiple of anything), Flint's 2048
// columns, 1000 and 264 (threads of the row's last pass without a vector), 2056 (a row over one
// CTA's 2048-column pass); top-6, top-4 and top-8; with and without the shared expert's row.
TEST(CudaMoe, CombineWithNextNormMatchesCombineThenRmsnorm) {
  std::mt19937 rng(45);
  for (int T : {37, 9})
    for (int H : {2048, 1000, 264, 2056})
      for (int K : {6, 4, 8})
        for (bool shared : {true, false}) {
          if (H != 2048 && K != 6) continue;  // other widths: top-6 only
          SCOPED_TRACE("T=" + std::to_string(T) + " H=" + std::to_string(H) + " K=" + std::to_string(K) +
                       (shared ? " shared" : " routed only"));
          const auto ys = random_bf16(rng, size_t(T) * K * H), ysh = random_bf16(rng, size_t(T) * H);
          const auto h = random_bf16(rng, size_t(T) * H, 2.f);
          const auto tw = random_f32(rng, size_t(T) * K, 0.4f, 0.2f);
          const auto gamma = random_f32(rng, size_t(H), 1.f, 0.3f);
          std::vector<int32_t> inv(size_t(T) * K);
          std::iota(inv.begin(), inv.end(), 0);
          std::shuffle(inv.begin(), inv.end(), rng);
          DeviceBuffer<bf16> d_ys(ys), d_ysh(ysh), d_h0(h), d_h1(h), d_x0(h.size()), d_x1(h.size());
          DeviceBuffer<int32_t> d_inv(inv);
          DeviceBuffer<float> d_tw(tw), d_gamma(gamma);
          d_x0.poison();
          d_x1.poison();
          const bf16* sh = shared ? d_ysh.get() : nullptr;
          const RowNorm next{d_gamma.get(), 1e-6f, d_x0.get()};
          moe_combine_sorted(d_ys.get(), d_inv.get(), d_tw.get(), sh, T, K, H, d_h0.get(), nullptr, &next);
          moe_combine_sorted(d_ys.get(), d_inv.get(), d_tw.get(), sh, T, K, H, d_h1.get(), nullptr);
          rmsnorm(d_h1.get(), d_gamma.get(), d_x1.get(), T, H, 1e-6f, nullptr);
          const auto h0 = d_h0.download(), h1 = d_h1.download(), x0 = d_x0.download(), x1 = d_x1.download();
          size_t differ = 0;
          for (size_t i = 0; i < h0.size(); ++i) differ += h0[i].bits != h1[i].bits || x0[i].bits != x1[i].bits;
          EXPECT_EQ(differ, 0u) << "fused combine + norm vs combine then the rmsnorm kernel";
          std::vector<bf16> h_ref = h;
          moe_combine_sorted_ref(ys, inv, tw, shared ? ysh : std::vector<bf16>{}, T, K, H, h_ref);
          const auto ch = compare(to_float(h0), to_float(h_ref), kBf16Rtol, kBf16Atol);
          EXPECT_TRUE(ch.ok()) << "h vs the CPU combine: " << ch.describe();
          std::vector<bf16> x_ref;
          rmsnorm_ref(h1, gamma, x_ref, T, H, 1e-6f);
          const auto c = compare(x0, x_ref, kBf16Rtol, kBf16Atol);
          EXPECT_TRUE(c.ok()) << "x vs the CPU rmsnorm: " << c.describe();
        }
}

}  // namespace
}  // namespace striker::cuda::testing
