// NVFP4 (W4A16) benchmarks: GEMV, selected-experts MoE, grouped MoE and the dequantise + cuBLASLt GEMM.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "bench_kernels.h"
#include "bench_util.h"
#include "backends/cuda/elementwise/elementwise.h"
#include "backends/cuda/linear/gemm_lt.h"
#include "backends/cuda/moe/moe.h"
#include "backends/cuda/moe/moe_grouped.h"
#include "backends/cuda/moe/moe_grouped_wgmma.h"
#include "backends/cuda/moe/moe_grouped_wgmma_nvfp4.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "backends/cuda/nvfp4/nvfp4_moe.h"
#include "backends/cuda/nvfp4/nvfp4_prefill.h"
#include "cuda_test_util.h"
#include "moe_routing_util.h"

namespace striker::cuda::testing {

namespace {

// NVFP4 (W4A16): weight bytes are codes (in/2) + scale bytes (in/16) per row.
double nvfp4_bytes(double rows, double in) { return rows * in * (0.5 + 1.0 / 16); }

}  // namespace

Nvfp4HostMatrix random_nvfp4(std::mt19937& rng, int64_t rows, int in) {
  Nvfp4HostMatrix m;
  m.codes.resize(size_t(rows) * size_t(in / 2));
  m.scales.resize(size_t(rows) * size_t(in / 16));
  for (auto& c : m.codes) c = uint8_t(rng() & 0xFF);
  for (auto& s : m.scales) s = uint8_t(0x30 + rng() % 16);
  return m;
}

void bench_nvfp4_gemv(std::mt19937& rng, const char* name, int T, int in, int out, bool logits) {
  const int nc = copies_for(nvfp4_bytes(out, in));
  auto x = random_bf16(rng, size_t(T) * in);
  const auto W = random_nvfp4(rng, out, in);
  const RowScale2 s2 = RowScale2::uniform(0.01f);
  std::vector<DeviceBuffer<uint8_t>> codes, scales;
  for (int i = 0; i < nc; ++i) codes.emplace_back(W.codes), scales.emplace_back(W.scales);
  DeviceBuffer<bf16> d_x(x), d_y(size_t(T) * out);
  DeviceBuffer<float> d_l(size_t(T) * out);
  auto launch = [&](int i) {
    const Nvfp4Matrix m{codes[size_t(i % nc)].get(), scales[size_t(i % nc)].get()};
    if (logits) nvfp4_gemv_logits(d_x.get(), T, in, m, s2, out, d_l.get(), bench_stream());
    else nvfp4_gemv(d_x.get(), T, in, m, s2, out, d_y.get(), bench_stream());
  };
  d_y.poison();
  d_l.poison();
  launch(0);
  std::vector<float> dot;
  nvfp4_gemv_ref(x, T, in, W, s2, out, dot);
  const auto got = logits ? d_l.download() : to_float(d_y.download());
  const auto c = compare(got, rounded(dot), kBf16Rtol, 1e-3);
  row(name, &c, time_us(launch), nvfp4_bytes(out, in));
}

// Routed experts of decode steps of 1, 2, 4, 8 tokens: 6 of 256 NVFP4 experts per token + an NVFP4
// shared expert (production's two launches), the routing rotated over several expert sets so the
// weights are not L2 hits (T = 1: 16 fixed sets as before; T > 1: 8 uniform routings).
void bench_nvfp4_moe(std::mt19937& rng) {
  const int H = 2048, I = 512, Is = 512, E = 256, K = 6;
  const auto g = random_nvfp4(rng, int64_t(E) * I, H), u = random_nvfp4(rng, int64_t(E) * I, H);
  const auto dn = random_nvfp4(rng, int64_t(E) * H, I);
  const auto sg = random_nvfp4(rng, Is, H), su = random_nvfp4(rng, Is, H), sd = random_nvfp4(rng, H, Is);
  DeviceBuffer<uint8_t> gc(g.codes), gs(g.scales), uc(u.codes), us(u.scales), dc(dn.codes), ds(dn.scales);
  DeviceBuffer<uint8_t> sgc(sg.codes), sgs(sg.scales), suc(su.codes), sus(su.scales), sdc(sd.codes), sds(sd.scales);
  const std::vector<float> s2(size_t(E), 0.01f);
  DeviceBuffer<float> d_s2(s2);
  const Nvfp4Shared sh{{sgc.get(), sgs.get()}, {suc.get(), sus.get()}, {sdc.get(), sds.get()},
                       0.01f, 0.01f, 0.01f, Is};
  const Nvfp4Stack gst{{gc.get(), gs.get()}, d_s2.get()}, ust{{uc.get(), us.get()}, d_s2.get()},
      dst{{dc.get(), ds.get()}, d_s2.get()};
  for (int T : {1, 2, 4, 8}) {
    auto x = random_bf16(rng, size_t(T) * H, 1.f);
    DeviceBuffer<bf16> d_x(x), d_h(size_t(T) * H), d_act(size_t(T) * K * I), d_sact(size_t(T) * Is);
    DeviceBuffer<bf16> d_ys(size_t(T) * (K + 1) * H);  // each slot's down rows (T >= 2)
    const std::vector<float> tw(size_t(T) * K, 0.4f);
    DeviceBuffer<float> d_tw(tw);
    std::vector<DeviceBuffer<int32_t>> routings;
    double distinct = 0;
    const int R = T == 1 ? 16 : 8;
    for (int r = 0; r < R; ++r) {
      std::vector<int32_t> ids_r;
      if (T == 1) {
        for (int k = 0; k < K; ++k) ids_r.push_back((r * K + k) * 5 % E);
      } else {
        ids_r = make_routing(rng, RoutingKind::uniform, T, K, E);
      }
      std::vector<int32_t> sorted = ids_r;
      std::sort(sorted.begin(), sorted.end());
      distinct += double(std::unique(sorted.begin(), sorted.end()) - sorted.begin()) / R;
      routings.emplace_back(ids_r);
    }
    auto moe = [&](int i) {
      const int32_t* idp = routings[size_t(i % R)].get();
      nvfp4_moe_gate_up(d_x.get(), T, H, gst, ust, I, idp, K, d_act.get(), &sh, d_sact.get(), bench_stream());
      nvfp4_moe_down_combine(d_act.get(), T, K, dst, I, H, idp, d_tw.get(), &sh, d_sact.get(), nullptr, d_h.get(),
                             bench_stream(), d_ys.get());
    };
    STRIKER_CUDA_CHECK(cudaMemset(d_h.get(), 0, size_t(T) * H * 2));
    row("nvfp4 moe T=" + std::to_string(T) + " (6 routed + shared)", nullptr, time_us(moe),
        (distinct + 1) * 3 * nvfp4_bytes(I, H));
  }
}

// The grouped MoE with NVFP4 experts (moe_grouped.h): as bench_moe_grouped, GB/s counting the
// NVFP4 bytes (codes + scales) of the experts the routing touches; the check compares h of the
// first 4 tokens with moe_float_ref on those tokens' experts.
void bench_nvfp4_moe_grouped(std::mt19937& rng, const Nvfp4ExpertStacks& w, int T) {
  constexpr int E = Nvfp4ExpertStacks::E, H = Nvfp4ExpertStacks::H, I = Nvfp4ExpertStacks::I;
  const int K = 6, S = T * K;
  const auto ids = make_routing(rng, RoutingKind::uniform, T, K, E);
  const auto tw = random_f32(rng, ids.size(), 0.4f, 0.2f);
  const auto x = random_bf16(rng, size_t(T) * H);
  const auto h0 = random_bf16(rng, size_t(T) * H);
  const int tm = moe_tile_rows_for(S, E);
  const RotatedRoutings rot(rng, ids, T, K, E);  // launch i: routing i % R (0 is `ids`)
  DeviceBuffer<int32_t> d_sorted(static_cast<size_t>(S)), d_row(static_cast<size_t>(S)), d_num(1);
  DeviceBuffer<MoeTile> d_tiles(static_cast<size_t>(moe_max_tiles(S, E, tm)));
  const MoeRouting r{d_sorted.get(), d_row.get(), d_tiles.get(), d_num.get(), E, tm};
  DeviceBuffer<bf16> d_x(x), d_h(h0), d_act(size_t(S) * I), d_y(size_t(S) * H);
  DeviceBuffer<float> d_tw(tw);
  d_act.poison();
  d_y.poison();
  auto sort = [&](int i) { moe_route_sort(rot.ids(i), T, K, r, bench_stream()); };
  auto gate_up = [&](int) {
    moe_grouped_gate_up_nvfp4(d_x.get(), T, K, H, w.stack(0), w.stack(1), I, r, d_act.get(), bench_stream());
  };
  auto down = [&](int) { moe_grouped_down_nvfp4(d_act.get(), T, K, I, w.stack(2), H, r, d_y.get(), bench_stream()); };
  auto all = [&](int i) {
    sort(i);
    gate_up(i);
    down(i);
    moe_combine_sorted(d_y.get(), d_row.get(), d_tw.get(), nullptr, T, K, H, d_h.get(), bench_stream());
  };
  all(0);
  const int Tc = std::min(T, 4);
  std::vector<int32_t> experts, idc;  // the first tokens' experts, renumbered 0..
  for (int s = 0; s < Tc * K; ++s) {
    auto it = std::find(experts.begin(), experts.end(), ids[size_t(s)]);
    if (it == experts.end()) it = experts.insert(experts.end(), ids[size_t(s)]);
    idc.push_back(int32_t(it - experts.begin()));
  }
  const auto fg = w.host_floats(0, experts), fu = w.host_floats(1, experts), fd = w.host_floats(2, experts);
  std::vector<bf16> xc(x.begin(), x.begin() + size_t(Tc) * H), hc(h0.begin(), h0.begin() + size_t(Tc) * H);
  std::vector<float> twc(tw.begin(), tw.begin() + size_t(Tc) * K);
  moe_float_ref(xc, Tc, H, I, 0, MoeFloatWeights{&fg, &fu, &fd, nullptr, nullptr, nullptr}, idc, twc, K, hc);
  auto got = d_h.download();
  got.resize(hc.size());
  const auto c = compare(got, hc, 2 * kBf16Rtol, kBf16Atol);
  std::vector<bool> used(size_t(E), false);
  for (int32_t e : ids) used[size_t(e)] = true;
  const double active = double(std::count(used.begin(), used.end(), true));
  const double mat = nvfp4_bytes(I, H);
  auto tflops = [&](double f, double us) {
    char b[48];
    std::snprintf(b, sizeof b, "%.0f TFLOP/s", f / (us * 1e-6) / 1e12);
    return std::string(b);
  };
  const std::string tag = "nvfp4 moe grouped T=" + std::to_string(T) + " ";
  const double gu = time_us(gate_up), dn = time_us(down);
  row(tag + "gate/up+SwiGLU", nullptr, gu, active * 2 * mat, tflops(2.0 * S * 2 * I * H, gu));
  row(tag + "down", nullptr, dn, active * mat, tflops(2.0 * S * I * H, dn));
  const double us_all = time_us(all);
  row(tag + "all 4 kernels", &c, us_all, active * 3 * mat, tflops(2.0 * S * 3 * I * H, us_all));
  if (T > 8) return;
  // Decode steps: the per-slot kernels (nvfp4_moe.h, production up to 8 tokens).
  DeviceBuffer<bf16> d_ys(size_t(T) * (K + 1) * H);  // each slot's down rows (T >= 2)
  auto notes = [&](double us) { return tflops(2.0 * S * 3 * I * H, us); };
  auto per_slot = [&](int i) {
    nvfp4_moe_gate_up(d_x.get(), T, H, w.stack(0), w.stack(1), I, rot.ids(i), K, d_act.get(), nullptr, nullptr,
                      bench_stream());
    nvfp4_moe_down_combine(d_act.get(), T, K, w.stack(2), I, H, rot.ids(i), d_tw.get(), nullptr, nullptr, nullptr,
                           d_h.get(), bench_stream(), d_ys.get());
  };
  row_checked_h("nvfp4 moe per-slot T=" + std::to_string(T) + " (2 kernels)", per_slot, d_h, h0, hc, active * 3 * mat,
                notes);
  // Each of the two kernels alone (the down kernel on the act of the last gate/up launch).
  auto ps_gate_up = [&](int i) {
    nvfp4_moe_gate_up(d_x.get(), T, H, w.stack(0), w.stack(1), I, rot.ids(i), K, d_act.get(), nullptr, nullptr,
                      bench_stream());
  };
  auto ps_down = [&](int i) {
    nvfp4_moe_down_combine(d_act.get(), T, K, w.stack(2), I, H, rot.ids(i), d_tw.get(), nullptr, nullptr, nullptr,
                           d_h.get(), bench_stream(), d_ys.get());
  };
  row("nvfp4 moe per-slot T=" + std::to_string(T) + " gate/up alone", nullptr, time_us(ps_gate_up), active * 2 * mat);
  row("nvfp4 moe per-slot T=" + std::to_string(T) + " down alone", nullptr, time_us(ps_down), active * mat);
}

// The Hopper grouped path with NVFP4 experts (moe_grouped_wgmma_nvfp4.h: the weights decoded in
// registers, no scratch): gate/up and down timed apart, then the whole layer (sort, gate/up, down,
// combine). Checked on every row against the NVFP4 mma.sync path on the same data, and h of the
// first 4 tokens against moe_float_ref.
void bench_nvfp4_moe_grouped_wgmma(std::mt19937& rng, const Nvfp4ExpertStacks& w, int T) {
  constexpr int E = Nvfp4ExpertStacks::E, H = Nvfp4ExpertStacks::H, I = Nvfp4ExpertStacks::I;
  const int K = 6, S = T * K;
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
  moe_route_sort(d_ids.get(), T, K, r64, bench_stream());
  moe_grouped_gate_up_nvfp4(d_x.get(), T, K, H, w.stack(0), w.stack(1), I, r64, d_act64.get(), bench_stream());
  moe_grouped_down_nvfp4(d_act64.get(), T, K, I, w.stack(2), H, r64, d_y64.get(), bench_stream());
  auto sort = [&](int) { moe_route_sort(d_ids.get(), T, K, r, bench_stream()); };
  auto gate_up = [&](int) {
    moe_grouped_gate_up_nvfp4_direct(d_x.get(), T, K, H, w.stack(0), w.stack(1), I, r, d_act.get(), bench_stream());
  };
  auto down = [&](int) {  // on the mma.sync path's act rows (same sorted order), checked against its y
    moe_grouped_down_nvfp4_direct(d_act64.get(), T, K, I, w.stack(2), H, r, d_y.get(), bench_stream());
  };
  auto all = [&](int) {
    sort(0);
    moe_grouped_gate_up_nvfp4_direct(d_x.get(), T, K, H, w.stack(0), w.stack(1), I, r, d_act.get(), bench_stream());
    moe_grouped_down_nvfp4_direct(d_act.get(), T, K, I, w.stack(2), H, r, d_y.get(), bench_stream());
    moe_combine_sorted(d_y.get(), d_row.get(), d_tw.get(), nullptr, T, K, H, d_h.get(), bench_stream());
  };
  all(0);
  STRIKER_CUDA_CHECK(cudaStreamSynchronize(bench_stream()));
  const auto ca = compare_finite(d_act.download(), d_act64.download(), 2 * kBf16Rtol, kBf16Atol);
  auto got = d_h.download();
  d_y.poison();
  down(0);
  STRIKER_CUDA_CHECK(cudaStreamSynchronize(bench_stream()));
  const auto cy = compare_finite(d_y.download(), d_y64.download(), 2 * kBf16Rtol, kBf16Atol);
  const int Tc = std::min(T, 4);
  std::vector<int32_t> experts, idc;  // the first tokens' experts, renumbered 0..
  for (int s = 0; s < Tc * K; ++s) {
    auto it = std::find(experts.begin(), experts.end(), ids[size_t(s)]);
    if (it == experts.end()) it = experts.insert(experts.end(), ids[size_t(s)]);
    idc.push_back(int32_t(it - experts.begin()));
  }
  const auto fg = w.host_floats(0, experts), fu = w.host_floats(1, experts), fd = w.host_floats(2, experts);
  std::vector<bf16> xc(x.begin(), x.begin() + size_t(Tc) * H), hc(h0.begin(), h0.begin() + size_t(Tc) * H);
  std::vector<float> twc(tw.begin(), tw.begin() + size_t(Tc) * K);
  moe_float_ref(xc, Tc, H, I, 0, MoeFloatWeights{&fg, &fu, &fd, nullptr, nullptr, nullptr}, idc, twc, K, hc);
  got.resize(hc.size());
  const auto ch = compare(got, hc, 2 * kBf16Rtol, kBf16Atol);
  const double nv = nvfp4_bytes(I, H);  // bytes of one expert matrix
  const std::string tag = "nvfp4 wgmma T=" + std::to_string(T) + " ";
  const double gu = time_us(gate_up);
  row(tag + "gate/up+SwiGLU vs mma.sync", &ca, gu, E * 2 * nv, tflops_note(2.0 * S * 2 * I * H, gu));
  const double dn = time_us(down);
  row(tag + "down vs mma.sync", &cy, dn, E * nv, tflops_note(2.0 * S * I * H, dn));
  const double us_all = time_us(all);
  row(tag + "all (sort, 2 GEMMs, combine) vs ref", &ch, us_all, E * 3 * nv, tflops_note(2.0 * S * 3 * I * H, us_all));
}

// Prefill projection: dequantise into the scratch + cuBLASLt with alpha = scale2.
void bench_nvfp4_gemm(std::mt19937& rng, LtGemm& lt, const char* name, int T, int in, int out) {
  auto x = random_bf16(rng, size_t(T) * in);
  const auto W = random_nvfp4(rng, out, in);
  DeviceBuffer<uint8_t> c(W.codes), sc(W.scales);
  DeviceBuffer<bf16> d_x(x), d_y(size_t(T) * out), d_scratch(size_t(out) * in);
  auto launch = [&](int) {
    nvfp4_gemm(lt, d_x.get(), T, in, {c.get(), sc.get()}, RowScale2::uniform(0.01f), out, d_y.get(), out,
               {d_scratch.get(), int64_t(out) * in}, bench_stream());
  };
  const double us = time_us(launch);
  char extra[64];
  std::snprintf(extra, sizeof extra, "%.0f TFLOP/s", 2.0 * T * in * out / (us * 1e-6) / 1e12);
  row(name, nullptr, us, nvfp4_bytes(out, in) + double(out) * in * 4 + double(T) * (in + out) * 2, extra);
}

}  // namespace striker::cuda::testing
