// Shared by the grouped-MoE GPU tests (test_moe_grouped*.cpp): device buffers of one routing and
// of one step, the step run (sort, the path's GEMMs, combine) and its checks against the
// references, the captured-graph replay on a new routing, and random NVFP4 expert stacks with
// their per-expert scale2 and host-side dequantisations.
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/moe/moe.h"
#include "backends/cuda/moe/moe_grouped.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "backends/cuda/nvfp4/nvfp4_moe.h"
#include "cuda_test_util.h"
#include "moe_routing_util.h"
#include "nvfp4_test_util.h"

namespace striker::cuda::testing {

// A decode MoE step run twice: `plain` wrote d_h without a norm; `fused(next)` runs the same down
// + combine on a copy of the step's starting h (h0) with the next layer's input norm into x. h
// must match bit for bit, x bit for bit the rmsnorm kernel on the plain h and, within bf16
// tolerance, the CPU rmsnorm of it; x poisoned first.
inline void expect_next_norm_matches(std::mt19937& rng, const std::vector<bf16>& h0, const DeviceBuffer<bf16>& d_h,
                                     int T, int H, const std::function<void(bf16* h, const RowNorm* next)>& fused,
                                     const std::string& where) {
  const auto gamma = random_f32(rng, size_t(H), 1.f, 0.3f);
  DeviceBuffer<float> d_gamma(gamma);
  DeviceBuffer<bf16> d_h2(h0), d_xn(size_t(T) * H), d_xk(size_t(T) * H);
  d_xn.poison();
  d_xk.poison();
  const RowNorm next{d_gamma.get(), 1e-6f, d_xn.get()};
  fused(d_h2.get(), &next);
  rmsnorm(d_h.get(), d_gamma.get(), d_xk.get(), T, H, 1e-6f, nullptr);
  const auto h1 = d_h.download(), h2 = d_h2.download(), xn = d_xn.download(), xk = d_xk.download();
  size_t differ = 0;
  for (size_t i = 0; i < h1.size(); ++i) differ += h1[i].bits != h2[i].bits || xn[i].bits != xk[i].bits;
  EXPECT_EQ(differ, 0u) << where << "down/combine with the next norm vs without, then the rmsnorm kernel";
  std::vector<bf16> x_ref;
  rmsnorm_ref(h1, gamma, x_ref, T, H, 1e-6f);
  const auto c = compare(xn, x_ref, kBf16Rtol, kBf16Atol);
  EXPECT_TRUE(c.ok()) << where << "x vs the CPU rmsnorm " << c.describe();
}

// Device buffers of one routing, sized for T tokens (outputs NaN/-1 poisoned).
struct DeviceRouting {
  DeviceBuffer<int32_t> ids, sorted, row, num;
  DeviceBuffer<MoeTile> tiles;
  MoeRouting r;
  // shared_rows: room for the shared expert's rows and tiles (moe_route_sort's shared_rows).
  DeviceRouting(const std::vector<int32_t>& topk_ids, int T, int K, int E, int tile_rows, int shared_rows = 0)
      : ids(topk_ids), sorted(size_t(T) * K + size_t(shared_rows)), row(size_t(T) * K), num(1),
        tiles(size_t(moe_max_tiles(int64_t(T) * K, E, tile_rows, shared_rows))) {
    sorted.poison();
    row.poison();
    num.poison();
    tiles.poison();
    r = MoeRouting{sorted.get(), row.get(), tiles.get(), num.get(), E, tile_rows};
  }
};

// K = 1 routing in which expert e gets exactly counts[e] tokens, in shuffled token order.
inline std::vector<int32_t> routing_with_counts(std::mt19937& rng, const std::vector<int>& counts) {
  std::vector<int32_t> ids;
  for (size_t e = 0; e < counts.size(); ++e) ids.insert(ids.end(), size_t(counts[e]), int32_t(e));
  std::shuffle(ids.begin(), ids.end(), rng);
  return ids;
}

// BF16 weights of E experts, on the host and the device (down scaled by down_scale).
struct Bf16Experts {
  std::vector<bf16> g, u, d;
  DeviceBuffer<bf16> dg, du, dd;
  Bf16Experts(std::mt19937& rng, int E, int H, int I, float scale, float down_scale = 0.f)
      : g(random_bf16(rng, size_t(E) * I * H, scale)), u(random_bf16(rng, g.size(), scale)),
        d(random_bf16(rng, size_t(E) * H * I, down_scale > 0.f ? down_scale : scale)), dg(g), du(u), dd(d) {}
};

// One step's host inputs for T tokens of width H and `slots` = T·K routed slots, drawn from rng
// in this order: top-k weights, activations x, residual h0.
struct MoeStepInputs {
  std::vector<float> tw;
  std::vector<bf16> x, h0;
  MoeStepInputs(std::mt19937& rng, size_t slots, int T, int H)
      : tw(random_f32(rng, slots, 0.4f, 0.2f)), x(random_bf16(rng, size_t(T) * H)), h0(random_bf16(rng, size_t(T) * H)) {}
};

// The step on the device: x, h (= h0), the top-k weights, and the sorted act [T·K, I] and
// y [T·K, H] rows (NaN-poisoned: a row left unwritten fails the comparisons).
struct DeviceMoeStep {
  int T, K, H, I;
  DeviceBuffer<bf16> x, h, act, y;
  DeviceBuffer<float> tw;
  DeviceMoeStep(const MoeStepInputs& in, int T_, int K_, int H_, int I_)
      : T(T_), K(K_), H(H_), I(I_), x(in.x), h(in.h0), act(size_t(T_) * K_ * I_), y(size_t(T_) * K_ * H_), tw(in.tw) {
    act.poison();
    y.poison();
  }
};

// A path's two grouped GEMMs (gate/up + SwiGLU into s.act, down into s.y) on `stream`.
using GroupedGemms = std::function<void(DeviceMoeStep& s, const MoeRouting& r, cudaStream_t stream)>;

// Sort, the path's GEMMs, combine into s.h: one MoE step as the backend enqueues it.
inline void run_moe_step(DeviceRouting& d, DeviceMoeStep& s, const GroupedGemms& gemms, cudaStream_t stream) {
  moe_route_sort(d.ids.get(), s.T, s.K, d.r, stream);
  gemms(s, d.r, stream);
  moe_combine_sorted(s.y.get(), d.row.get(), s.tw.get(), nullptr, s.T, s.K, s.H, s.h.get(), stream);
}

// On a failure: the first mismatching (row, column) pairs and how many rows / columns hold one,
// so a slip in the fragment or epilogue mapping shows its pattern in one GPU run.
inline std::string mismatches(const std::vector<bf16>& got, const std::vector<bf16>& ref, int cols, double rtol,
                       double atol_rel) {
  double ref_max = 0;
  for (const bf16 v : ref) ref_max = std::max(ref_max, double(std::fabs(bf16_to_float(v))));
  std::set<size_t> rows, cs;
  std::string first;
  size_t bad = 0;
  for (size_t i = 0; i < got.size() && i < ref.size(); ++i) {
    const double g = bf16_to_float(got[i]), r = bf16_to_float(ref[i]);
    if (!(std::fabs(g - r) <= atol_rel * ref_max + rtol * std::fabs(r))) {
      ++bad;
      rows.insert(i / size_t(cols));
      cs.insert(i % size_t(cols));
      if (bad <= 6)
        first += " (" + std::to_string(i / size_t(cols)) + "," + std::to_string(i % size_t(cols)) + ": " +
                 std::to_string(g) + " vs " + std::to_string(r) + ")";
    }
  }
  return " | " + std::to_string(bad) + " bad in " + std::to_string(rows.size()) + " rows, " +
         std::to_string(cs.size()) + " columns; first" + first;
}

// One NVFP4 expert stack on the device, with its per-expert scale2.
struct DeviceStack {
  DeviceBuffer<uint8_t> codes, scales;
  DeviceBuffer<float> s2;
  DeviceStack(const Nvfp4HostMatrix& m, const std::vector<float>& scale2)
      : codes(m.codes), scales(upload_scales(m.scales)), s2(scale2) {}
  Nvfp4Stack view() const { return {{codes.get(), scales.get()}, s2.get()}; }
};

// Per-expert scale2: even experts a power of two, odd ones not (both around 2^-7).
inline std::vector<float> mixed_scale2(int E, float base) {
  std::vector<float> s(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e)
    s[size_t(e)] = e % 2 == 0 ? std::ldexp(1.f, -6 - e % 5) : base * (1.f + 0.37f * float(e % 7));
  return s;
}

// The stack dequantised to bf16 (exact); scaled_floats (nvfp4_test_util.h) gives moe_float_ref's floats.
inline std::vector<bf16> dequantized_bf16(const Nvfp4HostMatrix& m, int64_t rows, int in) {
  const auto f = nvfp4_dequantize_ref(m, rows, in);
  std::vector<bf16> out(f.size());
  for (size_t i = 0; i < f.size(); ++i) out[i] = float_to_bf16(f[i]);
  return out;
}

// Random NVFP4 gate/up/down stacks of E experts (hidden H, inter I) with mixed per-expert scale2:
// on the device, and dequantised and scaled on the host (moe_float_ref's weights).
struct ScaledNvfp4Experts {
  Nvfp4HostMatrix g, u, d;  // drawn from rng in this order
  std::vector<float> s2g, s2u, s2d;
  DeviceStack ng, nu, nd;
  std::vector<float> fg, fu, fd;
  ScaledNvfp4Experts(std::mt19937& rng, int E, int H, int I)
      : g(random_nvfp4(rng, int64_t(E) * I, H)),
        u(random_nvfp4(rng, int64_t(E) * I, H)),
        d(random_nvfp4(rng, int64_t(E) * H, I)),
        s2g(mixed_scale2(E, 0.0061f)),
        s2u(mixed_scale2(E, 0.0093f)),
        s2d(mixed_scale2(E, 0.0042f)),
        ng(g, s2g),
        nu(u, s2u),
        nd(d, s2d),
        fg(scaled_floats(g, int64_t(E) * I, H, s2g, int64_t(I) * H)),
        fu(scaled_floats(u, int64_t(E) * I, H, s2u, int64_t(I) * H)),
        fd(scaled_floats(d, int64_t(E) * H, I, s2d, int64_t(H) * I)) {}
};

// h after a step by the per-token references (routed experts only): moe_ref on BF16 experts,
// moe_float_ref on the NVFP4 ones' scaled floats.
inline std::vector<bf16> per_token_h(const Bf16Experts& w, const std::vector<int32_t>& ids, const MoeStepInputs& in,
                                     int T, int K, int H, int I) {
  std::vector<bf16> h = in.h0;
  moe_ref(in.x, T, H, I, 0, MoeRefWeights{&w.g, &w.u, &w.d, nullptr, nullptr, nullptr}, ids, in.tw, K, h);
  return h;
}
inline std::vector<bf16> per_token_h(const ScaledNvfp4Experts& w, const std::vector<int32_t>& ids,
                                     const MoeStepInputs& in, int T, int K, int H, int I) {
  std::vector<bf16> h = in.h0;
  moe_float_ref(in.x, T, H, I, 0, MoeFloatWeights{&w.fg, &w.fu, &w.fd, nullptr, nullptr, nullptr}, ids, in.tw, K, h);
  return h;
}

// The grouped references of a routing's sorted rows: gate/up + SwiGLU of x, down of given act rows.
inline std::vector<bf16> grouped_gate_up_ref(const Bf16Experts& w, const std::vector<bf16>& x, int K, int H, int I,
                                     const std::vector<int32_t>& sorted, const std::vector<MoeTile>& tiles) {
  std::vector<bf16> act;
  moe_grouped_gate_up_ref(x, K, H, w.g, w.u, I, sorted, tiles, act);
  return act;
}
inline std::vector<bf16> grouped_gate_up_ref(const ScaledNvfp4Experts& w, const std::vector<bf16>& x, int K, int H, int I,
                                     const std::vector<int32_t>& sorted, const std::vector<MoeTile>& tiles) {
  std::vector<bf16> act;
  moe_grouped_gate_up_nvfp4_ref(x, K, H, w.g, w.s2g, w.u, w.s2u, I, sorted, tiles, act);
  return act;
}
inline std::vector<bf16> grouped_down_ref(const Bf16Experts& w, const std::vector<bf16>& act, int I, int H,
                                  const std::vector<MoeTile>& tiles) {
  std::vector<bf16> y;
  moe_grouped_down_ref(act, I, w.d, H, tiles, y);
  return y;
}
inline std::vector<bf16> grouped_down_ref(const ScaledNvfp4Experts& w, const std::vector<bf16>& act, int I, int H,
                                  const std::vector<MoeTile>& tiles) {
  std::vector<bf16> y;
  moe_grouped_down_nvfp4_ref(act, I, w.d, w.s2d, H, tiles, y);
  return y;
}

// Each kernel of a step against its reference: gate/up vs act_ref; down vs the down reference on
// the device's own act rows (a gate/up error is not counted twice); h vs h_ref (the per-token
// reference) when given.
template <class Experts>
void expect_step_matches(const DeviceMoeStep& s, const Experts& w, const std::vector<MoeTile>& tiles,
                         const std::vector<bf16>& act_ref, const std::vector<bf16>* h_ref, const std::string& where) {
  const auto act = s.act.download();
  const auto ca = compare(act, act_ref, 2 * kBf16Rtol, kBf16Atol);
  EXPECT_TRUE(ca.ok()) << where << "gate/up+SwiGLU " << ca.describe()
                       << (ca.ok() ? "" : mismatches(act, act_ref, s.I, 2 * kBf16Rtol, kBf16Atol));
  const auto y = s.y.download(), y_ref = grouped_down_ref(w, act, s.I, s.H, tiles);
  const auto cy = compare(y, y_ref, kBf16Rtol, kBf16Atol);
  EXPECT_TRUE(cy.ok()) << where << "down " << cy.describe()
                       << (cy.ok() ? "" : mismatches(y, y_ref, s.H, kBf16Rtol, kBf16Atol));
  if (h_ref) {
    const auto ch = compare(s.h.download(), *h_ref, 2 * kBf16Rtol, kBf16Atol);
    EXPECT_TRUE(ch.ok()) << where << "h after combine vs the per-token reference " << ch.describe();
  }
}

// One step on routing `ids` through `gemms`, sorted with each of `tile_rows` (the host references
// computed once: the sorted order does not depend on the tile height), checked kernel by kernel
// (expect_step_matches; h only when per_token: the per-token reference is slow).
template <class Experts>
void check_step(std::mt19937& rng, const Experts& w, const GroupedGemms& gemms, const std::vector<int32_t>& ids,
                int T, int K, int E, int H, int I, std::initializer_list<int> tile_rows, bool per_token,
                const std::string& where) {
  const MoeStepInputs in(rng, ids.size(), T, H);
  std::vector<int32_t> sorted, row;
  std::vector<MoeTile> tiles;
  moe_route_sort_ref(ids, T, K, E, *tile_rows.begin(), sorted, row, tiles);
  const auto act_ref = grouped_gate_up_ref(w, in.x, K, H, I, sorted, tiles);
  const auto h_ref = per_token ? per_token_h(w, ids, in, T, K, H, I) : std::vector<bf16>{};
  for (int tm : tile_rows) {
    const std::string at = where + "tile_rows=" + std::to_string(tm) + ": ";
    moe_route_sort_ref(ids, T, K, E, tm, sorted, row, tiles);
    DeviceRouting d(ids, T, K, E, tm);
    DeviceMoeStep s(in, T, K, H, I);
    run_moe_step(d, s, gemms, nullptr);
    STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
    ASSERT_EQ(d.num.download()[0], int32_t(tiles.size())) << at << "tile count";
    expect_step_matches(s, w, tiles, act_ref, per_token ? &h_ref : nullptr, at);
  }
}

// The step captured once in a CUDA graph with one routing, then replayed on it and on another
// (launch shapes depend only on T; tensor maps and scale2 travel by value or are read on the
// device): h against the per-token reference each time.
template <class Experts>
void expect_graph_replays_new_routing(std::mt19937& rng, const Experts& w, const GroupedGemms& gemms, int T, int K,
                                      int E, int H, int I, int tile_rows) {
  const MoeStepInputs in(rng, size_t(T) * K, T, H);
  const auto ids_a = make_routing(rng, RoutingKind::uniform, T, K, E);
  const auto ids_b = make_routing(rng, RoutingKind::skewed, T, K, E);
  DeviceMoeStep s(in, T, K, H, I);
  DeviceRouting d(ids_a, T, K, E, tile_rows);
  cudaStream_t stream = nullptr;
  STRIKER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  STRIKER_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  run_moe_step(d, s, gemms, stream);
  STRIKER_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  STRIKER_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (const auto* ids : {&ids_a, &ids_b}) {
    d.ids.upload(*ids);
    s.h.upload(in.h0);
    s.act.poison();
    s.y.poison();
    STRIKER_CUDA_CHECK(cudaDeviceSynchronize());  // the copies above ran on the legacy stream, the graph does not
    STRIKER_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    STRIKER_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto c = compare(s.h.download(), per_token_h(w, *ids, in, T, K, H, I), 2 * kBf16Rtol, kBf16Atol);
    EXPECT_TRUE(c.ok()) << "graph replay, routing " << (ids == &ids_a ? "a (captured)" : "b (new)") << ": "
                        << c.describe();
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Index of the first bit difference of two bf16 vectors (both as raw bits), or -1 (0 when the sizes differ).
inline int64_t first_bit_difference(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(bf16)) != 0) return int64_t(i);
  return -1;
}

// A decode MoE step's outputs as the per-slot tests read them back: act, shared act, h.
struct DecodeMoeOut {
  std::vector<bf16> act, sact, h;
};

// Runs a decode step of T tokens (run(T, x, ids, tw, h0) -> DecodeMoeOut), then each token alone
// (T = 1), and expects every token's act, shared act and h to be the same bits both ways and no NaN
// left from the poisoned outputs; returns the T-token step's outputs. With shared_one_token_bits
// false (a shared expert computed for all T tokens at once, NVFP4's nvfp4_moe_shared_skinny) only the
// routed act is compared bit for bit.
template <class Run>
DecodeMoeOut expect_step_matches_one_token_steps(Run run, int T, int H, int K, const std::vector<bf16>& x,
                                                 const std::vector<int32_t>& ids, const std::vector<float>& tw,
                                                 const std::vector<bf16>& h0, const std::string& where,
                                                 bool shared_one_token_bits = true) {
  auto rows = [](const auto& v, int t, size_t n) { return std::vector(v.begin() + t * n, v.begin() + (t + 1) * n); };
  const DecodeMoeOut got = run(T, x, ids, tw, h0);
  DecodeMoeOut one;
  for (int t = 0; t < T; ++t) {
    const DecodeMoeOut o = run(1, rows(x, t, H), rows(ids, t, K), rows(tw, t, K), rows(h0, t, H));
    one.act.insert(one.act.end(), o.act.begin(), o.act.end());
    one.sact.insert(one.sact.end(), o.sact.begin(), o.sact.end());
    one.h.insert(one.h.end(), o.h.begin(), o.h.end());
  }
  EXPECT_EQ(first_bit_difference(got.act, one.act), -1) << where << "act";
  if (shared_one_token_bits) {
    EXPECT_EQ(first_bit_difference(got.sact, one.sact), -1) << where << "shared act";
    EXPECT_EQ(first_bit_difference(got.h, one.h), -1) << where << "h";
  }
  const auto nans = [](const std::vector<bf16>& v) {  // a slot never written keeps the NaN poison
    return std::count_if(v.begin(), v.end(), [](bf16 b) { return std::isnan(bf16_to_float(b)); });
  };
  EXPECT_EQ(nans(got.act) + nans(got.sact) + nans(got.h), 0) << where << "NaN in act, shared act or h";
  return got;
}

}  // namespace striker::cuda::testing
