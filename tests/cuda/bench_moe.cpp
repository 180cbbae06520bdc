// MoE benchmarks: router + selected-experts decode kernels, and the grouped MoE of larger steps
// (device-side sort, grouped gate/up and down, combine) beside the cuBLASLt-per-expert path it replaced.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "bench_kernels.h"
#include "bench_util.h"
#include "backends/cuda/elementwise/elementwise.h"
#include "backends/cuda/elementwise/embedding.h"
#include "backends/cuda/linear/gemm_lt.h"
#include "backends/cuda/linear/gemv.h"
#include "backends/cuda/moe/moe.h"
#include "backends/cuda/moe/moe_grouped.h"
#include "backends/cuda/moe/moe_grouped_wgmma.h"
#include "backends/cuda/moe/router.h"
#include "cuda_test_util.h"
#include "moe_routing_util.h"

namespace striker::cuda::testing {

// The decode router (one launch per step, T <= 8) at Flint's shape, both weight formats, T = 1 and
// 8, over rotated weight copies (HBM, not L2), checked against the CPU reference (same expert ids,
// weights within 1e-5); then the production form (bf16 router, post-attention norm inside) at
// T = 1, 2, 4, 8, checked against the CPU reference on the kernel's own x (the rmsnorm's bits are
// CudaRouterDecode's test).
void bench_router_decode_rows(std::mt19937& rng) {
  const int H = 2048, E = 256, K = 6;
  const RouterShape rs{H, E, K, true, 2.5f};
  auto bias = random_f32(rng, size_t(E), 0.f, 0.05f);
  DeviceBuffer<float> d_bias(bias);
  for (bool f32 : {false, true}) {
    const double wbytes = double(E) * H * (f32 ? 4 : 2);
    const int nc = copies_for(wbytes);
    auto wb = random_bf16(rng, size_t(E) * H, 0.03f);
    auto wf = f32 ? random_f32(rng, wb.size(), 0.f, 0.03f) : to_float(wb);
    std::vector<DeviceBuffer<bf16>> wbs;
    std::vector<DeviceBuffer<float>> wfs;
    for (int i = 0; i < nc; ++i) {
      if (f32)
        wfs.emplace_back(wf);
      else
        wbs.emplace_back(wb);
    }
    for (int T : {1, 8}) {
      auto x = random_bf16(rng, size_t(T) * H);
      DeviceBuffer<bf16> d_x(x);
      DeviceBuffer<float> d_logits(size_t(T) * E), d_w(size_t(T) * K);
      DeviceBuffer<int32_t> d_ids(size_t(T) * K);
      auto counter = zero_counters(kRouterSyncWords);
      auto route = [&](int i) {
        const size_t c = size_t(i % nc);
        router_topk(d_x.get(), T, rs, f32 ? nullptr : wbs[c].get(), f32 ? wfs[c].get() : nullptr, d_bias.get(),
                    d_logits.get(), counter.get(), d_ids.get(), d_w.get(), bench_stream());
      };
      d_w.poison();
      d_ids.poison();
      route(0);
      std::vector<int32_t> ref_ids;
      std::vector<float> ref_w;
      router_topk_ref(x, T, rs, wf, &bias, ref_ids, ref_w);
      Comparison c = compare(d_w.download(), ref_w, 1e-5, 1e-6);
      if (d_ids.download() != ref_ids) c.nan_count += 1;  // other experts than the reference: fail the row
      const std::string name = std::string("router ") + (f32 ? "fp32" : "bf16") + " T=" + std::to_string(T);
      row(name + " (one launch)", &c, time_us(route), wbytes);
    }
  }
  // The production decode form: the bf16 router with the post-attention norm inside, T = 1..8 (x's
  // bits: CudaRouterDecode's tests).
  const auto wb = random_bf16(rng, size_t(E) * H, 0.03f);
  const int nc = copies_for(double(E) * H * 2);
  std::vector<DeviceBuffer<bf16>> wbs;
  for (int i = 0; i < nc; ++i) wbs.emplace_back(wb);
  DeviceBuffer<float> d_gamma(random_f32(rng, size_t(H), 1.f, 0.3f));
  for (int T : {1, 2, 4, 8}) {
    DeviceBuffer<bf16> d_h(random_bf16(rng, size_t(T) * H, 2.f)), d_x(size_t(T) * H);
    DeviceBuffer<float> d_logits(size_t(T) * E), d_w(size_t(T) * K);
    DeviceBuffer<int32_t> d_ids(size_t(T) * K);
    auto counter = zero_counters(kRouterSyncWords);
    const RouterInputNorm in_norm{d_gamma.get(), 1e-6f, d_x.get()};
    auto route = [&](int i) {
      router_topk(d_h.get(), T, rs, wbs[size_t(i % nc)].get(), nullptr, d_bias.get(), d_logits.get(), counter.get(),
                  d_ids.get(), d_w.get(), bench_stream(), &in_norm);
    };
    d_x.poison();
    d_w.poison();
    d_ids.poison();
    route(0);
    STRIKER_CUDA_CHECK(cudaStreamSynchronize(bench_stream()));
    std::vector<int32_t> ref_ids;
    std::vector<float> ref_w;
    router_topk_ref(d_x.download(), T, rs, to_float(wb), &bias, ref_ids, ref_w);
    Comparison c = compare(d_w.download(), ref_w, 1e-5, 1e-6);
    if (d_ids.download() != ref_ids || !counters_are_zero(counter)) c.nan_count += 1;
    row("router bf16 + norm T=" + std::to_string(T), &c, time_us(route), double(E) * H * 2);
  }
}

void bench_router_moe(std::mt19937& rng) {
  bench_router_decode_rows(rng);
  const int H = 2048, E = 256, I = 512, K = 6, Is = 512, T = 1;
  const RouterShape rs{H, E, K, true, 2.5f};
  auto x = random_bf16(rng, size_t(T) * H);
  auto wr = random_bf16(rng, size_t(E) * H, 0.03f);
  auto bias = random_f32(rng, size_t(E), 0.f, 0.05f);
  DeviceBuffer<bf16> d_x(x), d_wr(wr);
  DeviceBuffer<float> d_bias(bias), d_tw(size_t(T) * K);
  DeviceBuffer<int32_t> d_ids(size_t(T) * K);
  DeviceBuffer<float> d_logits(size_t(T) * E);
  auto counter = zero_counters(kRouterSyncWords);
  d_ids.poison();
  auto route = [&](int) {
    router_topk(d_x.get(), T, rs, d_wr.get(), nullptr, d_bias.get(), d_logits.get(), counter.get(), d_ids.get(), d_tw.get(),
                bench_stream());
  };
  route(0);
  std::vector<int32_t> ref_ids;
  std::vector<float> ref_w;
  router_topk_ref(x, T, rs, to_float(wr), &bias, ref_ids, ref_w);
  const auto ids = d_ids.download();
  Comparison c = compare(d_tw.download(), ref_w, 1e-5, 1e-6);
  if (ids != ref_ids) c.nan_count += 1;  // a different expert set fails the row
  row("router E=256 K=6", &c, time_us(route), double(E) * H * 2);

  // The routed experts: all 256 experts of one layer live on the device; only 6 are read.
  const size_t expert_elems = size_t(E) * I * H;
  auto wg = random_bf16(rng, expert_elems, 0.03f), wu = random_bf16(rng, expert_elems, 0.03f);
  auto wd = random_bf16(rng, expert_elems, 0.03f);
  auto sg = random_bf16(rng, size_t(Is) * H, 0.03f), su = random_bf16(rng, sg.size(), 0.03f);
  auto sd = random_bf16(rng, sg.size(), 0.03f);
  DeviceBuffer<bf16> d_wg(wg), d_wu(wu), d_wd(wd), d_sg(sg), d_su(su), d_sd(sd);
  auto h0 = random_bf16(rng, size_t(T) * H);
  DeviceBuffer<bf16> d_h(h0), d_act(size_t(T) * K * I), d_sact(size_t(T) * Is);
  auto moe = [&](int) {
    moe_gate_up(d_x.get(), T, H, d_wg.get(), d_wu.get(), I, d_ids.get(), K, d_act.get(), d_sg.get(), d_su.get(), Is,
                d_sact.get(), bench_stream());
    moe_down_combine(d_act.get(), T, K, d_wd.get(), I, H, d_ids.get(), d_tw.get(), d_sact.get(), d_sd.get(), Is,
                     d_h.get(), bench_stream());
  };
  d_act.poison();
  moe(0);
  std::vector<bf16> h_ref = h0;
  moe_ref(x, T, H, I, Is, MoeRefWeights{&wg, &wu, &wd, &sg, &su, &sd}, ref_ids, d_tw.download(), K, h_ref);
  const auto cm = compare(d_h.download(), h_ref, 2 * kBf16Rtol, kBf16Atol);
  // Timing: each call moves h on; different expert sets per call come from the random router above (fixed).
  // 256 experts x 6 MiB = 1.5 GiB > L2, but the same 6 are re-read: rotate the routing to defeat L2.
  std::vector<DeviceBuffer<int32_t>> routings;
  for (int r = 0; r < 16; ++r) {
    std::vector<int32_t> ids_r(static_cast<size_t>(K));
    for (int k = 0; k < K; ++k) ids_r[size_t(k)] = (r * K + k) * 5 % E;
    routings.emplace_back(ids_r);
  }
  auto moe_rot = [&](int i) {
    const int32_t* idp = routings[size_t(i % 16)].get();
    moe_gate_up(d_x.get(), T, H, d_wg.get(), d_wu.get(), I, idp, K, d_act.get(), d_sg.get(), d_su.get(), Is,
                d_sact.get(), bench_stream());
    moe_down_combine(d_act.get(), T, K, d_wd.get(), I, H, idp, d_tw.get(), d_sact.get(), d_sd.get(), Is, d_h.get(),
                     bench_stream());
  };
  row("moe T=1 (6 routed + shared, 2 kern)", &cm, time_us(moe_rot), double(K + 1) * 3 * I * H * 2);
}

// Decode steps of 1, 2, 4, 8 tokens through the per-slot kernels with a BF16 shared expert (production's
// two launches): 256 experts filled on the device, 8 uniform routings rotated so the experts are not
// L2 hits; GB/s over the distinct experts' bytes + the shared expert's.
void bench_moe_per_slot_shared(std::mt19937& rng) {
  const int H = 2048, E = 256, I = 512, K = 6, Is = 512;
  const int64_t expert_elems = int64_t(E) * I * H, shared_elems = int64_t(Is) * H;
  DeviceBuffer<bf16> d_wg(static_cast<size_t>(expert_elems)), d_wu(static_cast<size_t>(expert_elems)),
      d_wd(static_cast<size_t>(expert_elems));
  DeviceBuffer<bf16> d_sg(static_cast<size_t>(shared_elems)), d_su(static_cast<size_t>(shared_elems)),
      d_sd(static_cast<size_t>(shared_elems));
  fill_random_bf16(d_wg.get(), expert_elems, 21, 0.f, 0.03f, bench_stream());
  fill_random_bf16(d_wu.get(), expert_elems, 22, 0.f, 0.03f, bench_stream());
  fill_random_bf16(d_wd.get(), expert_elems, 23, 0.f, 0.03f, bench_stream());
  fill_random_bf16(d_sg.get(), shared_elems, 24, 0.f, 0.03f, bench_stream());
  fill_random_bf16(d_su.get(), shared_elems, 25, 0.f, 0.03f, bench_stream());
  fill_random_bf16(d_sd.get(), shared_elems, 26, 0.f, 0.03f, bench_stream());
  for (int T : {1, 2, 4, 8}) {
    DeviceBuffer<bf16> d_x(random_bf16(rng, size_t(T) * H)), d_h(size_t(T) * H);
    DeviceBuffer<bf16> d_act(size_t(T) * K * I), d_sact(size_t(T) * Is);
    DeviceBuffer<float> d_tw(std::vector<float>(size_t(T) * K, 0.4f));
    DeviceBuffer<bf16> d_ys(size_t(T) * (K + 1) * H);  // each slot's down rows (T >= 2)
    STRIKER_CUDA_CHECK(cudaMemset(d_h.get(), 0, size_t(T) * H * 2));
    std::vector<DeviceBuffer<int32_t>> rts;
    double distinct = 0;
    for (int r = 0; r < 8; ++r) {
      auto ids_r = make_routing(rng, RoutingKind::uniform, T, K, E);
      auto sorted = ids_r;
      std::sort(sorted.begin(), sorted.end());
      distinct += double(std::unique(sorted.begin(), sorted.end()) - sorted.begin()) / 8;
      rts.emplace_back(ids_r);
    }
    auto moe = [&](int i) {
      const int32_t* idp = rts[size_t(i % 8)].get();
      moe_gate_up(d_x.get(), T, H, d_wg.get(), d_wu.get(), I, idp, K, d_act.get(), d_sg.get(), d_su.get(), Is,
                  d_sact.get(), bench_stream());
      moe_down_combine(d_act.get(), T, K, d_wd.get(), I, H, idp, d_tw.get(), d_sact.get(), d_sd.get(), Is, d_h.get(),
                       bench_stream(), d_ys.get());
    };
    row("moe T=" + std::to_string(T) + " (6 routed + shared)", nullptr, time_us(moe),
        (distinct + 1) * 3 * I * H * 2);
  }
}

void bench_moe_grouped(std::mt19937& rng, LtGemm& lt, int T) {
  const int E = 256, H = 2048, I = 512, K = 6, S = T * K;
  const int64_t expert_elems = int64_t(E) * I * H;
  const auto n_w = static_cast<size_t>(expert_elems);
  DeviceBuffer<bf16> d_wg(n_w), d_wu(n_w), d_wd(n_w);
  fill_random_bf16(d_wg.get(), expert_elems, 11, 0.f, 0.03f, bench_stream());
  fill_random_bf16(d_wu.get(), expert_elems, 12, 0.f, 0.03f, bench_stream());
  fill_random_bf16(d_wd.get(), expert_elems, 13, 0.f, 0.03f, bench_stream());
  const auto ids = make_routing(rng, RoutingKind::uniform, T, K, E);
  const auto tw = random_f32(rng, ids.size(), 0.4f, 0.2f);
  const auto x = random_bf16(rng, size_t(T) * H);
  const auto h0 = random_bf16(rng, size_t(T) * H);
  const int tm = moe_tile_rows_for(S, E);
  // Launch i sorts routing i % R (routing 0 is `ids`, the checked one): a few tokens' experts
  // would otherwise stay in L2 from one launch to the next.
  const RotatedRoutings rot(rng, ids, T, K, E);
  DeviceBuffer<int32_t> d_ids(ids), d_sorted(static_cast<size_t>(S)), d_row(static_cast<size_t>(S)), d_num(1);
  DeviceBuffer<MoeTile> d_tiles(static_cast<size_t>(moe_max_tiles(S, E, tm)));
  const MoeRouting r{d_sorted.get(), d_row.get(), d_tiles.get(), d_num.get(), E, tm};
  DeviceBuffer<bf16> d_x(x), d_h(h0), d_act(size_t(S) * I), d_y(size_t(S) * H);
  DeviceBuffer<float> d_tw(tw);
  d_act.poison();
  d_y.poison();
  auto sort = [&](int i) { moe_route_sort(rot.ids(i), T, K, r, bench_stream()); };
  auto gate_up = [&](int) {
    moe_grouped_gate_up(d_x.get(), T, K, H, d_wg.get(), d_wu.get(), I, r, d_act.get(), bench_stream());
  };
  auto down = [&](int) { moe_grouped_down(d_act.get(), T, K, I, d_wd.get(), H, r, d_y.get(), bench_stream()); };
  auto combine = [&](int) {
    moe_combine_sorted(d_y.get(), d_row.get(), d_tw.get(), nullptr, T, K, H, d_h.get(), bench_stream());
  };
  auto all = [&](int i) {
    sort(i);
    gate_up(i);
    down(i);
    combine(i);
  };
  all(0);
  // Check the first tokens against the per-token reference (host copies of their experts only
  // would do, but the whole stacks are simpler and the copy is cheap next to the reference).
  const int Tc = std::min(T, 4);
  std::vector<bf16> wg(n_w), wu(n_w), wd(n_w);
  STRIKER_CUDA_CHECK(cudaMemcpy(wg.data(), d_wg.get(), wg.size() * 2, cudaMemcpyDeviceToHost));
  STRIKER_CUDA_CHECK(cudaMemcpy(wu.data(), d_wu.get(), wu.size() * 2, cudaMemcpyDeviceToHost));
  STRIKER_CUDA_CHECK(cudaMemcpy(wd.data(), d_wd.get(), wd.size() * 2, cudaMemcpyDeviceToHost));
  std::vector<bf16> xc(x.begin(), x.begin() + size_t(Tc) * H), hc(h0.begin(), h0.begin() + size_t(Tc) * H);
  std::vector<int32_t> idc(ids.begin(), ids.begin() + size_t(Tc) * K);
  std::vector<float> twc(tw.begin(), tw.begin() + size_t(Tc) * K);
  moe_ref(xc, Tc, H, I, 0, MoeRefWeights{&wg, &wu, &wd, nullptr, nullptr, nullptr}, idc, twc, K, hc);
  auto got = d_h.download();
  got.resize(hc.size());
  const auto c = compare(got, hc, 2 * kBf16Rtol, kBf16Atol);
  std::vector<bool> used(size_t(E), false);
  for (int32_t e : ids) used[size_t(e)] = true;
  const double active = double(std::count(used.begin(), used.end(), true));
  const double mat = double(I) * H * 2;  // bytes of one expert matrix
  const double flops = 2.0 * S * 3 * I * H;
  auto tflops = [&](double f, double us) {
    char b[48];
    std::snprintf(b, sizeof b, "%.0f TFLOP/s", f / (us * 1e-6) / 1e12);
    return std::string(b);
  };
  const std::string tag = "moe grouped T=" + std::to_string(T) + " ";
  row(tag + "sort (tile " + std::to_string(tm) + ")", nullptr, time_us(sort), double(S) * 4 * 3);
  const double gu = time_us(gate_up), dn = time_us(down);
  row(tag + "gate/up+SwiGLU", nullptr, gu, active * 2 * mat, tflops(2.0 * S * 2 * I * H, gu));
  row(tag + "down", nullptr, dn, active * mat, tflops(2.0 * S * I * H, dn));
  row(tag + "combine", nullptr, time_us(combine), double(S) * H * 2 + double(T) * H * 4);
  const double us_all = time_us(all);
  row(tag + "all 4 kernels", &c, us_all, active * 3 * mat, tflops(flops, us_all));
  if (T <= 8) {  // decode: the per-slot kernels (moe.h, production up to 8 tokens)
    DeviceBuffer<bf16> d_ys(size_t(T) * (K + 1) * H);  // each slot's down rows (T >= 2)
    auto notes = [&](double us) { return tflops(flops, us); };
    auto per_slot = [&](int i) {
      moe_gate_up(d_x.get(), T, H, d_wg.get(), d_wu.get(), I, rot.ids(i), K, d_act.get(), nullptr, nullptr, 0,
                  nullptr, bench_stream());
      moe_down_combine(d_act.get(), T, K, d_wd.get(), I, H, rot.ids(i), d_tw.get(), nullptr, nullptr, 0, d_h.get(),
                       bench_stream(), d_ys.get());
    };
    row_checked_h("moe per-slot T=" + std::to_string(T) + " (2 kernels, " + std::to_string(S) + " slots)", per_slot,
                  d_h, h0, hc, active * 3 * mat, notes);
    // Each of the two kernels alone (the down kernel on the act of the last gate/up launch).
    auto ps_gate_up = [&](int i) {
      moe_gate_up(d_x.get(), T, H, d_wg.get(), d_wu.get(), I, rot.ids(i), K, d_act.get(), nullptr, nullptr, 0,
                  nullptr, bench_stream());
    };
    auto ps_down = [&](int i) {
      moe_down_combine(d_act.get(), T, K, d_wd.get(), I, H, rot.ids(i), d_tw.get(), nullptr, nullptr, 0, d_h.get(),
                       bench_stream(), d_ys.get());
    };
    row("moe per-slot T=" + std::to_string(T) + " gate/up alone", nullptr, time_us(ps_gate_up), active * 2 * mat);
    row("moe per-slot T=" + std::to_string(T) + " down alone", nullptr, time_us(ps_down), active * mat);
    return;  // the host-sort path below is for prefill-sized steps
  }

  // The replaced path: routing to the host (one sync), counting sort there, per-expert GEMMs.
  std::vector<int32_t> ids_host(static_cast<size_t>(S));
  DeviceBuffer<int32_t> d_sort(static_cast<size_t>(S));
  DeviceBuffer<bf16> d_xs(size_t(S) * H), d_g(size_t(S) * I), d_u(size_t(S) * I);
  auto old_path = [&](int) {
    STRIKER_CUDA_CHECK(cudaMemcpy(ids_host.data(), d_ids.get(), size_t(S) * 4, cudaMemcpyDeviceToHost));
    std::vector<int32_t> offset(size_t(E) + 1, 0), sorted_token(static_cast<size_t>(S));
    for (int s = 0; s < S; ++s) ++offset[size_t(ids_host[size_t(s)]) + 1];
    for (int e = 0; e < E; ++e) offset[size_t(e) + 1] += offset[size_t(e)];
    std::vector<int32_t> cursor(offset.begin(), offset.end() - 1);
    for (int s = 0; s < S; ++s) sorted_token[size_t(cursor[size_t(ids_host[size_t(s)])]++)] = s / K;
    d_sort.upload(sorted_token);
    embedding_gather(d_x.get(), T, H, d_sort.get(), S, d_xs.get(), bench_stream());
    for (int e = 0; e < E; ++e) {
      const int n = offset[size_t(e) + 1] - offset[size_t(e)], off = offset[size_t(e)];
      if (n == 0) continue;
      const bf16* xs = d_xs.get() + int64_t(off) * H;
      lt.gemm_bf16(xs, n, H, d_wg.get() + int64_t(e) * I * H, I, d_g.get() + int64_t(off) * I, bench_stream());
      lt.gemm_bf16(xs, n, H, d_wu.get() + int64_t(e) * I * H, I, d_u.get() + int64_t(off) * I, bench_stream());
    }
    swiglu_act(d_g.get(), d_u.get(), d_act.get(), int64_t(S) * I, bench_stream());
    for (int e = 0; e < E; ++e) {
      const int n = offset[size_t(e) + 1] - offset[size_t(e)], off = offset[size_t(e)];
      if (n == 0) continue;
      lt.gemm_bf16(d_act.get() + int64_t(off) * I, n, I, d_wd.get() + int64_t(e) * H * I, H,
                   d_y.get() + int64_t(off) * H, bench_stream());
    }
    combine(0);
  };
  const double us_old = time_us(old_path);
  row("moe old (host sort, cuBLASLt/expert) T=" + std::to_string(T), nullptr, us_old, active * 3 * mat,
      tflops(flops, us_old));
}

// The Hopper path (moe_grouped_wgmma.h) at full size: sort with 128-row tiles, gate/up, down,
// all four kernels; TFLOP/s and the fraction of the 774 TFLOP/s bf16 peak count the useful
// FLOPs (2·T·K·3·I·H). Checked on every row against the mma.sync 64-row path run on the same
// data (act and y within bf16 rounding; a NaN anywhere fails), and h of the first 4 tokens
// against moe_ref.
void bench_moe_grouped_wgmma(std::mt19937& rng, int T) {
  const int E = 256, H = 2048, I = 512, K = 6, S = T * K;
  const int64_t expert_elems = int64_t(E) * I * H;
  const auto n_w = static_cast<size_t>(expert_elems);
  DeviceBuffer<bf16> d_wg(n_w), d_wu(n_w), d_wd(n_w);
  fill_random_bf16(d_wg.get(), expert_elems, 21, 0.f, 0.03f, bench_stream());
  fill_random_bf16(d_wu.get(), expert_elems, 22, 0.f, 0.03f, bench_stream());
  fill_random_bf16(d_wd.get(), expert_elems, 23, 0.f, 0.03f, bench_stream());
  const auto ids = make_routing(rng, RoutingKind::uniform, T, K, E);
  const auto tw = random_f32(rng, ids.size(), 0.4f, 0.2f);
  const auto x = random_bf16(rng, size_t(T) * H);
  const auto h0 = random_bf16(rng, size_t(T) * H);
  DeviceBuffer<int32_t> d_ids(ids), d_sorted(static_cast<size_t>(S)), d_row(static_cast<size_t>(S)), d_num(1);
  DeviceBuffer<MoeTile> d_tiles(static_cast<size_t>(moe_max_tiles(S, E, 16)));
  const MoeRouting r{d_sorted.get(), d_row.get(), d_tiles.get(), d_num.get(), E, kMoeWgmmaTileRows};
  MoeRouting r64 = r;
  r64.tile_rows = 64;
  DeviceBuffer<bf16> d_x(x), d_h(h0), d_act(size_t(S) * I), d_y(size_t(S) * H), d_act64(size_t(S) * I),
      d_y64(size_t(S) * H);
  DeviceBuffer<float> d_tw(tw);
  for (auto* b : {&d_act, &d_y, &d_act64, &d_y64}) b->poison();
  // The mma.sync path first (its routing is then re-sorted for 128-row tiles; the row order is the same).
  moe_route_sort(d_ids.get(), T, K, r64, bench_stream());
  moe_grouped_gate_up(d_x.get(), T, K, H, d_wg.get(), d_wu.get(), I, r64, d_act64.get(), bench_stream());
  moe_grouped_down(d_act64.get(), T, K, I, d_wd.get(), H, r64, d_y64.get(), bench_stream());
  auto sort = [&](int) { moe_route_sort(d_ids.get(), T, K, r, bench_stream()); };
  auto gate_up = [&](int) {
    moe_grouped_gate_up_wgmma(d_x.get(), T, K, H, d_wg.get(), d_wu.get(), I, nullptr, nullptr, r, d_act.get(),
                              bench_stream());
  };
  auto down = [&](int) {
    moe_grouped_down_wgmma(d_act.get(), T, K, I, d_wd.get(), H, nullptr, r, d_y.get(), bench_stream());
  };
  auto combine = [&](int) {
    moe_combine_sorted(d_y.get(), d_row.get(), d_tw.get(), nullptr, T, K, H, d_h.get(), bench_stream());
  };
  auto all = [&](int i) {
    sort(i);
    gate_up(i);
    down(i);
    combine(i);
  };
  all(0);
  STRIKER_CUDA_CHECK(cudaStreamSynchronize(bench_stream()));
  const auto ca = compare_finite(d_act.download(), d_act64.download(), 2 * kBf16Rtol, kBf16Atol);
  // down of the wgmma path on the mma.sync path's act, so both y see the same input
  moe_grouped_down_wgmma(d_act64.get(), T, K, I, d_wd.get(), H, nullptr, r, d_y.get(), bench_stream());
  const auto cy = compare_finite(d_y.download(), d_y64.download(), 2 * kBf16Rtol, kBf16Atol);
  const int Tc = std::min(T, 4);
  std::vector<bf16> wg(n_w), wu(n_w), wd(n_w);
  STRIKER_CUDA_CHECK(cudaMemcpy(wg.data(), d_wg.get(), wg.size() * 2, cudaMemcpyDeviceToHost));
  STRIKER_CUDA_CHECK(cudaMemcpy(wu.data(), d_wu.get(), wu.size() * 2, cudaMemcpyDeviceToHost));
  STRIKER_CUDA_CHECK(cudaMemcpy(wd.data(), d_wd.get(), wd.size() * 2, cudaMemcpyDeviceToHost));
  std::vector<bf16> xc(x.begin(), x.begin() + size_t(Tc) * H), hc(h0.begin(), h0.begin() + size_t(Tc) * H);
  std::vector<int32_t> idc(ids.begin(), ids.begin() + size_t(Tc) * K);
  std::vector<float> twc(tw.begin(), tw.begin() + size_t(Tc) * K);
  moe_ref(xc, Tc, H, I, 0, MoeRefWeights{&wg, &wu, &wd, nullptr, nullptr, nullptr}, idc, twc, K, hc);
  auto got = d_h.download();
  got.resize(hc.size());
  const auto ch = compare(got, hc, 2 * kBf16Rtol, kBf16Atol);
  const double mat = double(I) * H * 2;
  const std::string tag = "moe wgmma T=" + std::to_string(T) + " ";
  row(tag + "sort (tile 128)", nullptr, time_us(sort), double(S) * 4 * 3);
  const double gu = time_us(gate_up), dn = time_us(down);
  row(tag + "gate/up+SwiGLU vs mma.sync", &ca, gu, E * 2 * mat, tflops_note(2.0 * S * 2 * I * H, gu));
  row(tag + "down vs mma.sync", &cy, dn, E * mat, tflops_note(2.0 * S * I * H, dn));
  const double us_all = time_us(all);
  row(tag + "all 4 kernels vs moe_ref", &ch, us_all, E * 3 * mat, tflops_note(2.0 * S * 3 * I * H, us_all));
}

}  // namespace striker::cuda::testing
