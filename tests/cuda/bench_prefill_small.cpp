// The small kernels of a prefill layer at T = 2048 and 8192 tokens (Flint's shapes: hidden 2048,
// 256 experts top-6, 32 q + 4 kv heads of 128): the batched router (cuBLASLt logits + selection),
// the per-token QK-norm + RoPE + KV write, the residual add (alone and with the norm after it in
// one pass), RMSNorm, SwiGLU and the MoE combine (alone and with the next norm). Each checked
// against its CPU reference (the router: against the selection rule on its own logits, and the
// logits of sampled tokens against the CPU reference's).
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/attention/qk_rope_kv.h"
#include "backends/cuda/elementwise/elementwise.h"
#include "backends/cuda/elementwise/rmsnorm.h"
#include "backends/cuda/moe/moe.h"
#include "backends/cuda/moe/router.h"
#include "bench_kernels.h"
#include "bench_util.h"

namespace striker::cuda::testing {
namespace {

void bench_router_prefill(std::mt19937& rng, LtGemm& lt, int T) {
  const RouterShape rs{2048, 256, 6, true, 2.5f};
  const int H = rs.hidden, E = rs.n_experts, K = rs.top_k;
  const auto x = random_bf16(rng, size_t(T) * H);
  const auto wr = random_bf16(rng, size_t(E) * H, 0.03f);
  const auto bias = random_f32(rng, size_t(E), 0.f, 0.05f);
  DeviceBuffer<bf16> d_x(x), d_wr(wr);
  DeviceBuffer<float> d_bias(bias), d_logits(size_t(T) * E), d_w(size_t(T) * K);
  DeviceBuffer<int32_t> d_ids(size_t(T) * K);
  d_logits.poison();
  d_w.poison();
  d_ids.poison();
  auto route = [&](int) {
    router_topk(d_x.get(), T, rs, d_wr.get(), nullptr, d_bias.get(), d_logits.get(), nullptr, d_ids.get(), d_w.get(),
                bench_stream(), nullptr, &lt);
  };
  route(0);
  STRIKER_CUDA_CHECK(cudaStreamSynchronize(bench_stream()));
  const auto logits = d_logits.download();
  std::vector<int32_t> rule_ids;
  std::vector<float> rule_w;
  router_select_ref(std::vector<double>(logits.begin(), logits.end()), T, rs, &bias, rule_ids, rule_w);
  Comparison c = compare(d_w.download(), rule_w, 1e-5, 1e-6);
  if (d_ids.download() != rule_ids) c.nan_count += 1;  // a selection other than the rule's fails the row
  // Logits of every 64th token against the CPU reference's.
  std::vector<bf16> xs;
  std::vector<float> got;
  for (int t = 0; t < T; t += 64) {
    xs.insert(xs.end(), x.begin() + long(t) * H, x.begin() + long(t + 1) * H);
    got.insert(got.end(), logits.begin() + long(t) * E, logits.begin() + long(t + 1) * E);
  }
  const auto ref = router_logits_ref(xs, int(xs.size()) / H, H, E, to_float(wr));
  const Comparison cl = compare(got, std::vector<float>(ref.begin(), ref.end()), 1e-4, 1e-4);
  if (!cl.ok()) c.nan_count += 1;
  const std::string n = " T=" + std::to_string(T);
  const double bytes = double(T) * H * 2 + double(E) * H * 2 + double(T) * E * 4;
  row("router bf16 logits+select" + n, &c, time_us(route), bytes);
  auto logits_only = [&](int) { lt.gemm_bf16_f32out(d_x.get(), T, H, d_wr.get(), E, d_logits.get(), bench_stream()); };
  const double us = time_us(logits_only);
  row("  router logits (cuBLASLt)" + n, &cl, us, bytes, tflops_note(2.0 * T * E * H, us));
}

void bench_qk_rope_prefill(std::mt19937& rng, int T) {
  const HeadShape hs{32, 4, 128};
  const int B = 16, heads = 40;
  const auto qkv = random_bf16(rng, size_t(T) * heads * 128);
  const auto qw = random_f32(rng, 128, 1.f, 0.2f), kw = random_f32(rng, 128, 1.f, 0.2f);
  const auto inv = rope_inv_freq(10000.f, 128);
  std::vector<int32_t> pos(static_cast<size_t>(T));
  std::iota(pos.begin(), pos.end(), 90000);  // a chunk late in a long prompt
  std::vector<int64_t> slots(static_cast<size_t>(T));
  std::iota(slots.begin(), slots.end(), int64_t(0));
  const size_t cache = size_t(T / B + 1) * 4 * B * 128;
  DeviceBuffer<bf16> d_qkv(qkv), d_k(cache), d_v(cache), d_q(size_t(T) * 32 * 128);
  DeviceBuffer<float> d_qw(qw), d_kw(kw), d_inv(inv);
  DeviceBuffer<int32_t> d_pos(pos);
  DeviceBuffer<int64_t> d_slots(slots);
  d_q.poison();
  d_k.poison();
  auto launch = [&](int) {
    qk_norm_rope_kv_write(d_qkv.get(), T, hs, d_qw.get(), d_kw.get(), 1e-6f, d_pos.get(), d_inv.get(), d_slots.get(),
                          B, d_k.get(), d_v.get(), d_q.get(), bench_stream());
  };
  launch(0);
  std::vector<bf16> rk = d_k.download(), rv = d_v.download(), rq;
  qk_norm_rope_kv_write_ref(qkv, T, hs, qw, kw, 1e-6f, pos, &inv, slots, B, rk, rv, rq);
  Comparison c = compare(d_q.download(), rq, 2 * kBf16Rtol, kBf16Atol);
  if (!compare(d_k.download(), rk, 2 * kBf16Rtol, kBf16Atol).ok()) c.nan_count += 1;
  row("qk norm+rope+kv write T=" + std::to_string(T), &c, time_us(launch), double(qkv.size()) * 2 * 2);
}

void bench_residual_swiglu_prefill(std::mt19937& rng, int T) {
  const int64_t n = int64_t(T) * 2048;
  const auto h = random_bf16(rng, size_t(n), 2.f), y = random_bf16(rng, size_t(n));
  DeviceBuffer<bf16> d_h(h), d_y(y);
  residual_add(d_h.get(), d_y.get(), n, nullptr);
  std::vector<float> want(static_cast<size_t>(n));
  for (size_t i = 0; i < want.size(); ++i) want[i] = round_bf16(bf16_to_float(h[i]) + bf16_to_float(y[i]));
  Comparison c = compare(to_float(d_h.download()), want, 0.0, 0.0);
  auto add = [&](int) { residual_add(d_h.get(), d_y.get(), n, bench_stream()); };
  row("residual add T=" + std::to_string(T) + " H=2048", &c, time_us(add), 3.0 * double(n) * 2);

  // The o_proj residual with the post-attention norm in its pass (add_rmsnorm), as prefill runs it.
  {
    const auto w = random_f32(rng, 2048, 1.f, 0.2f);
    DeviceBuffer<bf16> d_h2(h), d_x(static_cast<size_t>(n));
    DeviceBuffer<float> d_w(w);
    d_x.poison();
    add_rmsnorm(d_h2.get(), d_y.get(), d_w.get(), d_x.get(), T, 2048, 1e-6f, nullptr);
    std::vector<bf16> ref_h = h, ref_x;
    add_rmsnorm_ref(ref_h, y, w, ref_x, T, 2048, 1e-6f);
    Comparison cn = compare(d_x.download(), ref_x, kBf16Rtol, kBf16Atol);
    if (!compare(d_h2.download(), ref_h, 0.0, 0.0).ok()) cn.nan_count += 1;
    auto fused = [&](int) { add_rmsnorm(d_h2.get(), d_y.get(), d_w.get(), d_x.get(), T, 2048, 1e-6f, bench_stream()); };
    row("residual + rmsnorm T=" + std::to_string(T) + " H=2048", &cn, time_us(fused), 4.0 * double(n) * 2);
  }

  const int64_t m = int64_t(T) * 512;  // the shared expert's intermediate width
  const std::vector<bf16> g(h.begin(), h.begin() + m), u(y.begin(), y.begin() + m);
  DeviceBuffer<bf16> d_g(g), d_u(u), d_a(static_cast<size_t>(m));
  d_a.poison();
  auto act = [&](int) { swiglu_act(d_g.get(), d_u.get(), d_a.get(), m, bench_stream()); };
  act(0);
  std::vector<bf16> ref;
  swiglu_act_ref(g, u, ref);
  c = compare(d_a.download(), ref, kBf16Rtol, 0.0);
  row("swiglu T=" + std::to_string(T) + " I=512", &c, time_us(act), 3.0 * double(m) * 2);
}

// The MoE combine of a prefill layer (K = 6 sorted rows per token, the shared expert's row, h),
// alone and with the next layer's input norm in its pass (the last pass of every MoE layer above
// 8 tokens); the fused form checked bit for bit against the combine followed by the rmsnorm kernel.
void bench_combine_norm_prefill(std::mt19937& rng, int T) {
  const int H = 2048, K = 6;
  const int64_t n = int64_t(T) * H;
  std::vector<int32_t> inv(size_t(T) * K);  // slot -> sorted row: any permutation
  std::iota(inv.begin(), inv.end(), 0);
  std::shuffle(inv.begin(), inv.end(), rng);
  const auto tw = random_f32(rng, inv.size(), 0.4f, 0.2f);
  const auto gamma = random_f32(rng, size_t(H), 1.f, 0.2f);
  const size_t N = size_t(n);
  DeviceBuffer<bf16> d_y(N * K), d_ysh(N), d_h0(N), d_h(N), d_h1(N), d_x(N), d_x1(N);
  fill_random_bf16(d_y.get(), n * K, 71, 0.f, 0.5f, nullptr);
  fill_random_bf16(d_ysh.get(), n, 72, 0.f, 0.5f, nullptr);
  fill_random_bf16(d_h0.get(), n, 73, 0.f, 2.f, nullptr);
  DeviceBuffer<int32_t> d_inv(inv);
  DeviceBuffer<float> d_tw(tw), d_gamma(gamma);
  STRIKER_CUDA_CHECK(cudaMemcpy(d_h.get(), d_h0.get(), N * 2, cudaMemcpyDeviceToDevice));
  STRIKER_CUDA_CHECK(cudaMemcpy(d_h1.get(), d_h0.get(), N * 2, cudaMemcpyDeviceToDevice));
  d_x.poison();
  d_x1.poison();
  const RowNorm next{d_gamma.get(), 1e-6f, d_x.get()};
  moe_combine_sorted(d_y.get(), d_inv.get(), d_tw.get(), d_ysh.get(), T, K, H, d_h.get(), nullptr, &next);
  moe_combine_sorted(d_y.get(), d_inv.get(), d_tw.get(), d_ysh.get(), T, K, H, d_h1.get(), nullptr);
  rmsnorm(d_h1.get(), d_gamma.get(), d_x1.get(), T, H, 1e-6f, nullptr);
  STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
  Comparison c = compare(d_x.download(), d_x1.download(), 0.0, 0.0);
  if (!compare(d_h.download(), d_h1.download(), 0.0, 0.0).ok()) c.nan_count += 1;
  auto fused = [&](int) {
    moe_combine_sorted(d_y.get(), d_inv.get(), d_tw.get(), d_ysh.get(), T, K, H, d_h.get(), bench_stream(), &next);
  };
  auto plain = [&](int) {
    moe_combine_sorted(d_y.get(), d_inv.get(), d_tw.get(), d_ysh.get(), T, K, H, d_h1.get(), bench_stream());
  };
  const std::string tag = " T=" + std::to_string(T) + " H=2048";
  row("moe combine (K=6 + shared)" + tag, nullptr, time_us(plain), double(n) * 2 * (K + 3));
  row("moe combine + next norm" + tag, &c, time_us(fused), double(n) * 2 * (K + 4));
}

}  // namespace

void bench_prefill_small_kernels(std::mt19937& rng, LtGemm& lt) {
  for (int T : {2048, 8192}) {
    bench_router_prefill(rng, lt, T);
    bench_qk_rope_prefill(rng, T);
    bench_residual_swiglu_prefill(rng, T);
    bench_rmsnorm(rng, T, 2048);
    bench_combine_norm_prefill(rng, T);
  }
}

}  // namespace striker::cuda::testing
