// The one-launch decode router (router_topk with T <= 8) against the two-launch path (T > 8) and
// the CPU reference. The two-launch path is reached by appending 8 more tokens to the same T. An
// fp32 router computes a token's logits in the same per-lane order in both, so the first T rows
// must be the same bits; a bf16 router's batched logits come from a cuBLASLt tensor-core GEMM
// (another fp32 summation order, allowed by FLINT.md §4: router.h), so they are checked against the
// CPU reference's logits with a tolerance, and its ids and weights against the selection rule
// applied to those same logits. The decode launch must leave its exchange words at zero.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "backends/cuda/elementwise/rmsnorm.h"
#include "backends/cuda/linear/gemm_lt.h"
#include "backends/cuda/moe/router.h"
#include "cuda_test_util.h"
#include "router_sigmoid_probe.h"

namespace striker::cuda::testing {
namespace {

struct RouterRun {
  std::vector<float> logits, w;
  std::vector<int32_t> ids;
};

// The first `keep` tokens' results of router_topk over T tokens.
RouterRun run_router(const RouterShape& rs, int T, const DeviceBuffer<bf16>& x, const bf16* wb, const float* wf,
                     const float* bias, int keep, LtGemm* lt) {
  DeviceBuffer<float> d_logits(size_t(T) * rs.n_experts), d_w(size_t(T) * rs.top_k);
  DeviceBuffer<int32_t> d_ids(size_t(T) * rs.top_k);
  d_logits.poison();
  d_w.poison();
  d_ids.poison();
  auto counter = zero_counters(kRouterSyncWords);
  router_topk(x.get(), T, rs, wb, wf, bias, d_logits.get(), counter.get(), d_ids.get(), d_w.get(), nullptr, nullptr, lt);
  STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(counters_are_zero(counter));
  RouterRun r{d_logits.download(), d_w.download(), d_ids.download()};
  r.logits.resize(size_t(keep) * rs.n_experts);
  r.w.resize(size_t(keep) * rs.top_k);
  r.ids.resize(size_t(keep) * rs.top_k);
  return r;
}

// Bit equality of two float vectors, NaN never passing; "" when equal, else the first difference.
std::string bit_diff(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  if (a.size() != b.size()) return std::string(what) + ": sizes differ";
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i]))
      return std::string(what) + "[" + std::to_string(i) + "] is NaN (unwritten or poisoned)";
    uint32_t ua = 0, ub = 0;
    std::memcpy(&ua, &a[i], 4);
    std::memcpy(&ub, &b[i], 4);
    if (ua != ub)
      return std::string(what) + "[" + std::to_string(i) + "]: " + std::to_string(a[i]) + " vs " +
             std::to_string(b[i]);
  }
  return "";
}

// A batched bf16-router run of tokens x [T, hidden] (weights wf as floats): logits against the CPU
// reference's within fp32 summation-order noise (no NaN: every row written), ids and weights
// against the selection rule applied to the run's own logits, and ids against the CPU reference.
void expect_batched_bf16_matches(const RouterRun& run, const std::vector<bf16>& x, int T, const RouterShape& rs,
                                 const std::vector<float>& wf, const std::vector<float>* bias) {
  const std::vector<double> ref_logits = router_logits_ref(x, T, rs.hidden, rs.n_experts, wf);
  const auto cl = compare(run.logits, std::vector<float>(ref_logits.begin(), ref_logits.end()), 1e-4, 1e-4);
  EXPECT_TRUE(cl.ok()) << "batched logits vs the CPU reference: " << cl.describe();
  std::vector<int32_t> rule_ids, ref_ids;
  std::vector<float> rule_w, ref_w;
  router_select_ref(std::vector<double>(run.logits.begin(), run.logits.end()), T, rs, bias, rule_ids, rule_w);
  EXPECT_EQ(run.ids, rule_ids) << "the selection differs from the rule applied to the GPU's own logits";
  const auto cw = compare(run.w, rule_w, 1e-5, 1e-6);
  EXPECT_TRUE(cw.ok()) << "weights vs the rule on the GPU's logits: " << cw.describe();
  router_select_ref(ref_logits, T, rs, bias, ref_ids, ref_w);
  EXPECT_EQ(run.ids, ref_ids) << "batched path picks other experts than the CPU reference";
}

TEST(CudaRouterDecode, MatchesTwoLaunchPathAndReference) {
  std::mt19937 rng(77);
  struct Case {
    RouterShape rs;
    bool with_bias;
  };
  // Flint's shape; and one whose hidden (1000) is not a multiple of the 256-wide warp pass and whose
  // expert count (250) does not split evenly over the 8 CTAs, top-8 without normalisation.
  const Case cases[] = {{{2048, 256, 6, true, 2.5f}, true}, {{1000, 250, 8, false, 1.5f}, false}};
  for (const Case& cs : cases) {
    const RouterShape& rs = cs.rs;
    for (bool f32 : {false, true}) {
      auto wb = random_bf16(rng, size_t(rs.n_experts) * rs.hidden, 0.03f);
      auto wf = f32 ? random_f32(rng, wb.size(), 0.f, 0.03f) : to_float(wb);
      auto bias = random_f32(rng, size_t(rs.n_experts), 0.f, 0.05f);
      DeviceBuffer<bf16> d_wb(wb);
      DeviceBuffer<float> d_wf(wf), d_bias(bias);
      const float* bias_ptr = cs.with_bias ? d_bias.get() : nullptr;
      LtGemm lt;
      for (int T = 1; T <= 8; ++T) {
        SCOPED_TRACE("E=" + std::to_string(rs.n_experts) + " hidden=" + std::to_string(rs.hidden) +
                     (f32 ? " fp32" : " bf16") + " weights, T=" + std::to_string(T));
        auto x = random_bf16(rng, size_t(T + 8) * rs.hidden);  // T tokens, then 8 that push T + 8 past 8
        DeviceBuffer<bf16> d_x(x);
        const bf16* wbp = f32 ? nullptr : d_wb.get();
        const float* wfp = f32 ? d_wf.get() : nullptr;
        const RouterRun one = run_router(rs, T, d_x, wbp, wfp, bias_ptr, T, &lt);
        if (f32) {  // the CUDA-core batched kernel: the decode forms' bits
          const RouterRun two = run_router(rs, T + 8, d_x, wbp, wfp, bias_ptr, T, &lt);
          EXPECT_EQ(bit_diff(one.logits, two.logits, "logits"), "");
          EXPECT_EQ(bit_diff(one.w, two.w, "weights"), "");
          EXPECT_EQ(one.ids, two.ids) << "expert ids differ between the decode and two-launch paths";
        } else {  // the tensor-core GEMM: the reference's logits within tolerance, the rule on them
          const RouterRun two = run_router(rs, T + 8, d_x, wbp, wfp, bias_ptr, T + 8, &lt);
          expect_batched_bf16_matches(two, x, T + 8, rs, wf, cs.with_bias ? &bias : nullptr);
        }
        x.resize(size_t(T) * rs.hidden);
        std::vector<int32_t> ref_ids;
        std::vector<float> ref_w;
        router_topk_ref(x, T, rs, wf, cs.with_bias ? &bias : nullptr, ref_ids, ref_w);
        EXPECT_EQ(one.ids, ref_ids) << "decode path picks other experts than the CPU reference";
        const auto c = compare(one.w, ref_w, 1e-5, 1e-6);
        EXPECT_TRUE(c.ok()) << "decode weights vs reference: " << c.describe();
      }
    }
  }
}

// The router that normalises its own input (x = rmsnorm(h) inside the decode launch; the rmsnorm
// kernel in front of the batched form) against the rmsnorm kernel followed by the plain router: x,
// logits, ids and weights bit for bit, and x against the CPU rmsnorm reference. h is left as it was.
TEST(CudaRouterDecode, InputNormMatchesRmsnormKernelThenRouter) {
  std::mt19937 rng(81);
  const RouterShape shapes[] = {{2048, 256, 6, true, 2.5f}, {1000, 250, 8, false, 1.5f}};
  for (const RouterShape& rs : shapes)
    for (bool f32 : {false, true})
      for (int T : {1, 3, 8, 9}) {  // 9: the batched two-launch form
        SCOPED_TRACE("hidden=" + std::to_string(rs.hidden) + (f32 ? " fp32" : " bf16") + " T=" + std::to_string(T));
        const auto wb = random_bf16(rng, size_t(rs.n_experts) * rs.hidden, 0.03f);
        const auto wf = f32 ? random_f32(rng, wb.size(), 0.f, 0.03f) : to_float(wb);
        const auto bias = random_f32(rng, size_t(rs.n_experts), 0.f, 0.05f);
        const auto gamma = random_f32(rng, size_t(rs.hidden), 1.f, 0.5f);
        const auto h = random_bf16(rng, size_t(T) * rs.hidden, 2.f);
        DeviceBuffer<bf16> d_wb(wb), d_h(h), d_x(std::vector<bf16>(h.size())), d_x2(std::vector<bf16>(h.size()));
        DeviceBuffer<float> d_wf(wf), d_bias(bias), d_gamma(gamma);
        d_x.poison();
        const bf16* wbp = f32 ? nullptr : d_wb.get();
        const float* wfp = f32 ? d_wf.get() : nullptr;
        const float eps = 1e-6f;
        // Fused: router_topk on h with the input norm.
        DeviceBuffer<float> d_logits(size_t(T) * rs.n_experts), d_w(size_t(T) * rs.top_k);
        DeviceBuffer<int32_t> d_ids(size_t(T) * rs.top_k);
        d_logits.poison();
        d_w.poison();
        d_ids.poison();
        auto counter = zero_counters(kRouterSyncWords);
        const RouterInputNorm in{d_gamma.get(), eps, d_x.get()};
        LtGemm lt;  // T = 9, bf16: both runs take the same GEMM, so the same bits
        router_topk(d_h.get(), T, rs, wbp, wfp, d_bias.get(), d_logits.get(), counter.get(), d_ids.get(), d_w.get(),
                    nullptr, &in, &lt);
        // Separate: the rmsnorm kernel, then the router on x.
        rmsnorm(d_h.get(), d_gamma.get(), d_x2.get(), T, rs.hidden, eps, nullptr);
        STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
        const RouterRun sep = run_router(rs, T, d_x2, wbp, wfp, d_bias.get(), T, &lt);
        const auto x_fused = d_x.download(), x_sep = d_x2.download();
        ASSERT_EQ(x_fused.size(), x_sep.size());
        for (size_t i = 0; i < x_fused.size(); ++i)
          ASSERT_EQ(x_fused[i].bits, x_sep[i].bits) << "x[" << i << "] differs from the rmsnorm kernel's";
        EXPECT_EQ(bit_diff(d_logits.download(), sep.logits, "logits"), "");
        EXPECT_EQ(bit_diff(d_w.download(), sep.w, "weights"), "");
        EXPECT_EQ(d_ids.download(), sep.ids);
        EXPECT_TRUE(counters_are_zero(counter));
        const auto ch = compare(d_h.download(), h, 0.0, 0.0);
        EXPECT_TRUE(ch.ok()) << "the router wrote into h: " << ch.describe();
        std::vector<bf16> x_ref;
        rmsnorm_ref(h, gamma, x_ref, T, rs.hidden, eps);
        const auto c = compare(x_fused, x_ref, kBf16Rtol, kBf16Atol);
        EXPECT_TRUE(c.ok()) << "x vs the CPU rmsnorm: " << c.describe();
      }
}

// The batched logits kernel (fp32 router) puts passes of 16 tokens on grid.y and strides past
// 65,535 of them: a step of 1,048,592 tokens writes every token, and the last tokens' results are
// bit-identical to routing them alone (a token's logits depend on its own row only, in the same
// per-lane order). The bf16 router's GEMM and the selection kernel (one CTA per token) at the same
// length: every row written, the last tokens against the CPU reference.
TEST(CudaRouterBatched, CoversMoreTokensThanOneGridDimension) {
  std::mt19937 rng(79);
  const RouterShape rs{64, 16, 4, true, 1.f};
  const int T = 65535 * 16 + 32, tail = 16;
  const auto x = random_bf16(rng, size_t(T) * rs.hidden);
  const auto wb = random_bf16(rng, size_t(rs.n_experts) * rs.hidden, 0.1f);
  const auto wf = random_f32(rng, wb.size(), 0.f, 0.1f);
  const auto bias = random_f32(rng, size_t(rs.n_experts), 0.f, 0.05f);
  const std::vector<bf16> x_tail(x.end() - long(tail) * rs.hidden, x.end());
  DeviceBuffer<bf16> d_x(x), d_wb(wb), d_tail(x_tail);
  DeviceBuffer<float> d_wf(wf), d_bias(bias);
  LtGemm lt;
  const RouterRun all = run_router(rs, T, d_x, nullptr, d_wf.get(), d_bias.get(), T, &lt);
  EXPECT_EQ(bit_diff(all.logits, all.logits, "logits"), "");  // no NaN: every token's row was written
  const RouterRun alone = run_router(rs, tail, d_tail, nullptr, d_wf.get(), d_bias.get(), tail, &lt);
  const std::vector<float> last(all.logits.end() - long(tail) * rs.n_experts, all.logits.end());
  EXPECT_EQ(bit_diff(last, alone.logits, "last tokens' logits"), "");
  EXPECT_EQ(std::vector<int32_t>(all.ids.end() - long(tail) * rs.top_k, all.ids.end()), alone.ids);

  RouterRun gemm = run_router(rs, T, d_x, d_wb.get(), nullptr, d_bias.get(), T, &lt);
  EXPECT_EQ(bit_diff(gemm.logits, gemm.logits, "bf16-router logits"), "");
  EXPECT_EQ(bit_diff(gemm.w, gemm.w, "bf16-router weights"), "");
  gemm.logits.erase(gemm.logits.begin(), gemm.logits.end() - long(tail) * rs.n_experts);
  gemm.w.erase(gemm.w.begin(), gemm.w.end() - long(tail) * rs.top_k);
  gemm.ids.erase(gemm.ids.begin(), gemm.ids.end() - long(tail) * rs.top_k);
  expect_batched_bf16_matches(gemm, x_tail, tail, rs, to_float(wb), &bias);
}

// Flint's router at a prefill-sized step that is no multiple of any tile (2,053 tokens): every
// row written, each token's ids and weights the rule applied to its own logits, and the logits of
// every 16th token against the CPU reference. A bf16 step of more than 8 tokens without the GEMM
// is refused with a clear error.
TEST(CudaRouterBatched, Bf16GemmLogitsAtPrefillSize) {
  std::mt19937 rng(83);
  const RouterShape rs{2048, 256, 6, true, 2.5f};
  const int T = 2053;
  const auto x = random_bf16(rng, size_t(T) * rs.hidden);
  const auto wb = random_bf16(rng, size_t(rs.n_experts) * rs.hidden, 0.03f);
  const auto bias = random_f32(rng, size_t(rs.n_experts), 0.f, 0.05f);
  DeviceBuffer<bf16> d_x(x), d_wb(wb);
  DeviceBuffer<float> d_bias(bias);
  LtGemm lt;
  const RouterRun run = run_router(rs, T, d_x, d_wb.get(), nullptr, d_bias.get(), T, &lt);
  std::vector<int32_t> rule_ids;
  std::vector<float> rule_w;
  router_select_ref(std::vector<double>(run.logits.begin(), run.logits.end()), T, rs, &bias, rule_ids, rule_w);
  EXPECT_EQ(bit_diff(run.logits, run.logits, "logits"), "");
  EXPECT_EQ(run.ids, rule_ids);
  const auto cw = compare(run.w, rule_w, 1e-5, 1e-6);
  EXPECT_TRUE(cw.ok()) << cw.describe();
  RouterRun sampled;
  std::vector<bf16> xs;
  const int E = rs.n_experts, K = rs.top_k;
  for (int t = 0; t < T; t += 16) {
    xs.insert(xs.end(), x.begin() + long(t) * rs.hidden, x.begin() + long(t + 1) * rs.hidden);
    sampled.logits.insert(sampled.logits.end(), run.logits.begin() + long(t) * E, run.logits.begin() + long(t + 1) * E);
    sampled.w.insert(sampled.w.end(), run.w.begin() + long(t) * K, run.w.begin() + long(t + 1) * K);
    sampled.ids.insert(sampled.ids.end(), run.ids.begin() + long(t) * K, run.ids.begin() + long(t + 1) * K);
  }
  expect_batched_bf16_matches(sampled, xs, int(xs.size()) / rs.hidden, rs, to_float(wb), &bias);

  DeviceBuffer<float> d_logits(size_t(T) * E), d_w(size_t(T) * K);
  DeviceBuffer<int32_t> d_ids(size_t(T) * K);
  EXPECT_THROW(router_topk(d_x.get(), T, rs, d_wb.get(), nullptr, d_bias.get(), d_logits.get(), nullptr, d_ids.get(),
                           d_w.get(), nullptr),
               Error);
}

// Logits for the selection tests: each drawn from a few values (many exact ties between experts),
// with some tokens' logits ±inf; with `nan`, some NaN logits and a few all-NaN tokens.
std::vector<float> select_test_logits(std::mt19937& rng, int T, int E, bool nan) {
  const float values[] = {-2.f, -1.f, -0.5f, 0.f, 0.5f, 1.f, 2.f, 3.f};
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits(size_t(T) * E);
  for (int t = 0; t < T; ++t)
    for (int e = 0; e < E; ++e) {
      float v = values[rng() % 8];
      if (t % 7 == 3 && rng() % 5 == 0) v = rng() % 2 ? inf : -inf;
      if (nan && t % 11 == 5 && rng() % 3 == 0) v = std::nanf("");
      if (nan && t % 97 == 13) v = std::nanf("");
      logits[size_t(t) * E + e] = v;
    }
  return logits;
}

struct SelectRun {
  std::vector<int32_t> ids;
  std::vector<float> w;
};
SelectRun run_select(const std::vector<float>& logits, int T, const RouterShape& rs, const std::vector<float>& bias) {
  DeviceBuffer<float> d_logits(logits), d_bias(bias), d_w(size_t(T) * rs.top_k);
  DeviceBuffer<int32_t> d_ids(size_t(T) * rs.top_k);
  d_w.poison();
  d_ids.poison();
  router_select_topk(d_logits.get(), T, rs, d_bias.get(), d_ids.get(), d_w.get(), nullptr);
  STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
  return SelectRun{d_ids.download(), d_w.download()};
}

const RouterShape kSelectShapes[] = {{64, 256, 6, true, 2.5f}, {64, 1000, 8, true, 1.f}, {64, 40, 3, false, 1.5f},
                                     {64, 8, 8, true, 1.f},    {64, 33, 5, true, 1.f},   {64, 300, 1, false, 1.f}};

// The selection kernel of steps above 8 tokens on logits with many exact ties and infinities:
// ids exactly the rule's (ties to the lower expert), weights within fp32 rounding of the rule's.
TEST(CudaRouterBatched, SelectionMatchesRuleWithTiesAndInfinities) {
  std::mt19937 rng(91);
  const int T = 1027;
  for (const RouterShape& rs : kSelectShapes) {
    const std::string where = "E=" + std::to_string(rs.n_experts) + " K=" + std::to_string(rs.top_k);
    const auto logits = select_test_logits(rng, T, rs.n_experts, false);
    std::vector<float> bias(size_t(rs.n_experts));
    for (auto& b : bias) b = 0.125f * float(int(rng() % 3) - 1);
    const SelectRun run = run_select(logits, T, rs, bias);
    std::vector<int32_t> rule_ids;
    std::vector<float> rule_w;
    router_select_ref(std::vector<double>(logits.begin(), logits.end()), T, rs, &bias, rule_ids, rule_w);
    EXPECT_EQ(run.ids, rule_ids) << where;
    const auto cw = compare(run.w, rule_w, 1e-5, 1e-6);
    EXPECT_TRUE(cw.ok()) << where << ": " << cw.describe();
  }
}

// The decode form at shapes away from Flint's — hidden past 2048 (chunks beyond the held ones) and
// not a multiple of 256, expert counts that do not split over the CTAs' row pairs or give fewer
// row CTAs than tokens (E = 8 at T = 8) — with exact ties: pairs of identical expert rows with
// equal biases (equal scores: the lower expert must win), with and without the input norm, both
// weight formats. ids exactly and weights within 1e-5 of the CPU reference run on the kernel's own
// x (x itself: the rmsnorm kernel's bits); each launch repeated (the exchange words must be back
// at zero, and the second run the same bits); poisoned outputs (NaN never passes).
TEST(CudaRouterDecode, OddShapesExactTiesAndRepeatedLaunches) {
  std::mt19937 rng(97);
  const RouterShape shapes[] = {{2056, 33, 5, true, 1.f}, {64, 8, 8, true, 1.f}, {1000, 250, 8, false, 1.5f},
                                {2048, 256, 6, true, 2.5f}, {512, 1000, 8, true, 2.5f}};
  for (const RouterShape& rs : shapes)
    for (bool f32 : {false, true})
      for (bool with_norm : {false, true})
        for (int T : {1, 2, 5, 8}) {
          SCOPED_TRACE("hidden=" + std::to_string(rs.hidden) + " E=" + std::to_string(rs.n_experts) +
                       (f32 ? " fp32" : " bf16") + (with_norm ? " norm" : "") + " T=" + std::to_string(T));
          const int E = rs.n_experts, H = rs.hidden, K = rs.top_k;
          auto wb = random_bf16(rng, size_t(E) * H, 0.03f);
          auto bias = random_f32(rng, size_t(E), 0.f, 0.05f);
          for (int e = 1; e < E; e += 3) {  // expert e a copy of expert e - 1: equal logits, equal scores
            std::copy(wb.begin() + long(e - 1) * H, wb.begin() + long(e) * H, wb.begin() + long(e) * H);
            bias[size_t(e)] = bias[size_t(e - 1)];
          }
          auto wf = to_float(wb);
          if (f32)  // fp32 weights off the bf16 grid, the copies kept
            for (int e = 0; e < E; ++e)
              for (int i = 0; i < H; ++i) {
                float& v = wf[size_t(e) * H + i];
                v = e % 3 == 1 ? wf[size_t(e - 1) * H + i] : v * (1.f + 1e-3f * float(i % 7));
              }
          const auto gamma = random_f32(rng, size_t(H), 1.f, 0.3f);
          const auto h = random_bf16(rng, size_t(T) * H, with_norm ? 2.f : 1.f);
          DeviceBuffer<bf16> d_wb(wb), d_h(h), d_x(h.size());
          DeviceBuffer<float> d_wf(wf), d_bias(bias), d_gamma(gamma);
          auto counter = zero_counters(kRouterSyncWords);
          const RouterInputNorm in{d_gamma.get(), 1e-6f, d_x.get()};
          std::vector<float> first_w;
          std::vector<int32_t> first_ids;
          for (int run = 0; run < 2; ++run) {
            DeviceBuffer<float> d_logits(size_t(T) * E), d_w(size_t(T) * K);
            DeviceBuffer<int32_t> d_ids(size_t(T) * K);
            d_logits.poison();
            d_w.poison();
            d_ids.poison();
            d_x.poison();
            router_topk(d_h.get(), T, rs, f32 ? nullptr : d_wb.get(), f32 ? d_wf.get() : nullptr, d_bias.get(),
                        d_logits.get(), counter.get(), d_ids.get(), d_w.get(), nullptr, with_norm ? &in : nullptr);
            STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
            EXPECT_TRUE(counters_are_zero(counter)) << "the exchange words were not left at zero";
            const std::vector<bf16> x = with_norm ? d_x.download() : h;
            std::vector<int32_t> ref_ids;
            std::vector<float> ref_w;
            router_topk_ref(x, T, rs, wf, &bias, ref_ids, ref_w);
            const auto ids = d_ids.download();
            const auto w = d_w.download();
            EXPECT_EQ(ids, ref_ids) << "run " << run;
            const auto c = compare(w, ref_w, 1e-5, 1e-6);
            EXPECT_TRUE(c.ok()) << "run " << run << ": " << c.describe();
            const auto logits = d_logits.download();
            EXPECT_EQ(bit_diff(logits, logits, "logits"), "");  // every logit written
            for (int t = 0; t < T; ++t)
              for (int e = 1; e < E; e += 3)  // the copies' logits are the same bits
                ASSERT_EQ(logits[size_t(t) * E + e], logits[size_t(t) * E + e - 1]);
            if (with_norm) {
              std::vector<bf16> x_ref;
              rmsnorm_ref(h, gamma, x_ref, T, H, 1e-6f);
              const auto cx = compare(x, x_ref, kBf16Rtol, kBf16Atol);
              EXPECT_TRUE(cx.ok()) << "x vs the CPU rmsnorm: " << cx.describe();
            }
            if (run == 0) {
              first_w = w;
              first_ids = ids;
            } else {
              EXPECT_EQ(ids, first_ids);
              EXPECT_EQ(bit_diff(w, first_w, "weights of the second run"), "");
            }
          }
        }
}

TEST(CudaRouterDecode, TiesGoToTheLowerExpert) {
  const RouterShape rs{64, 32, 4, true, 1.f};
  std::vector<bf16> x(64, float_to_bf16(1.f));
  std::vector<float> w(size_t(32) * 64, 0.f);  // every logit 0: all scores tie at 0.5
  DeviceBuffer<bf16> d_x(x);
  DeviceBuffer<float> d_wf(w);
  const RouterRun r = run_router(rs, 1, d_x, nullptr, d_wf.get(), nullptr, 1, nullptr);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(r.w, (std::vector<float>{0.25f, 0.25f, 0.25f, 0.25f}));
}

// The selection's sigmoids (router_sigmoids: the IEEE division's fast path written out, and the
// division only for divisors of 2^126 or more) have the bits of 1 / (1 + expf(-x)) for every float x,
// NaNs and infinities included: the decode and batched selections keep the ids and weights they had.
TEST(CudaRouter, SigmoidsHaveTheDivisionsBitsOnEveryFloat) {
  DeviceBuffer<unsigned long long> mismatches(1);
  DeviceBuffer<uint32_t> first(1);
  router_sigmoid_probe(mismatches.get(), first.get());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(mismatches.download()[0], 0ull) << "first differing input bits 0x" << std::hex << first.download()[0];
}

}  // namespace
}  // namespace striker::cuda::testing
