// Times every decode kernel (and the prefill ones) at Flint's full-size shapes on the GPU and checks each result
// against the CPU reference on the same data. Prints one table row per kernel:
//   kernel | check (max error ratio, <= 1 passes) | µs | GB/s | fraction of 4.1 TB/s (H200 copy).
// Weights are rotated over several copies (>= 256 MiB in all) so timings are not L2 hits.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <string>

#include "backends/cuda/attention.h"
#include "backends/cuda/device_info.h"
#include "backends/cuda/embedding.h"
#include "backends/cuda/gemm_lt.h"
#include "backends/cuda/gemv.h"
#include "backends/cuda/elementwise.h"
#include "backends/cuda/moe.h"
#include "backends/cuda/moe_grouped.h"
#include "backends/cuda/nvfp4_linear.h"
#include "backends/cuda/nvfp4_moe.h"
#include "backends/cuda/nvfp4_prefill.h"
#include "backends/cuda/qk_rope_kv.h"
#include "backends/cuda/rmsnorm.h"
#include "backends/cuda/router.h"
#include "cuda_test_util.h"
#include "moe_routing_util.h"

using namespace striker;
using namespace striker::cuda;
using namespace striker::cuda::testing;

namespace {

constexpr double kCopyRoof = 4.1e12;  // bytes/s, measured device-to-device copy on the H200
int g_failures = 0;

// Median over 7 samples of (time of 20 back-to-back launches)/20, in microseconds.
double time_us(const std::function<void(int)>& launch) {
  cudaEvent_t a, b;
  STRIKER_CUDA_CHECK(cudaEventCreate(&a));
  STRIKER_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) launch(i);
  std::vector<double> samples;
  int it = 0;
  for (int s = 0; s < 7; ++s) {
    STRIKER_CUDA_CHECK(cudaEventRecord(a));
    for (int r = 0; r < 20; ++r) launch(it++);
    STRIKER_CUDA_CHECK(cudaEventRecord(b));
    STRIKER_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    STRIKER_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    samples.push_back(double(ms) * 1000.0 / 20);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

void row(const std::string& name, const Comparison* c, double us, double bytes, const std::string& extra = "") {
  const bool ok = c == nullptr || c->ok();
  if (!ok) ++g_failures;
  char check[64];
  if (c) std::snprintf(check, sizeof check, "%s %.3f", ok ? "PASS" : "FAIL", c->max_ratio);
  else std::snprintf(check, sizeof check, "-");
  const double gbs = bytes / (us * 1e-6) / 1e9;
  std::printf("| %-34s | %-10s | %9.2f | %8.0f | %5.2f | %s\n", name.c_str(), check, us, gbs, gbs * 1e9 / kCopyRoof,
              extra.c_str());
  std::fflush(stdout);
}

int copies_for(double bytes) { return int(std::max(1.0, std::ceil(256.0 * (1 << 20) / bytes))); }

std::vector<float> rounded(const std::vector<float>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = round_bf16(v[i]);
  return r;
}

void bench_copy() {
  const size_t n = size_t(2) << 30;
  DeviceBuffer<char> a(n), b(n);
  STRIKER_CUDA_CHECK(cudaMemset(a.get(), 1, n));
  const double us = time_us([&](int) { STRIKER_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), n, cudaMemcpyDeviceToDevice)); });
  row("copy 2 GiB (read+write)", nullptr, us, 2.0 * n);
}

void bench_gemv(std::mt19937& rng, const char* name, int T, int in, int out, bool logits) {
  const double wbytes = double(in) * out * 2;
  const int nc = copies_for(wbytes);
  auto x = random_bf16(rng, size_t(T) * in);
  auto W = random_bf16(rng, size_t(out) * in, 0.05f);
  std::vector<DeviceBuffer<bf16>> ws;
  for (int i = 0; i < nc; ++i) ws.emplace_back(W);
  DeviceBuffer<bf16> d_x(x), d_y(size_t(T) * out);
  DeviceBuffer<float> d_l(size_t(T) * out);
  auto launch = [&](int i) {
    if (logits) gemv_logits(d_x.get(), T, in, ws[size_t(i % nc)].get(), out, d_l.get(), nullptr);
    else gemv_bf16(d_x.get(), T, in, ws[size_t(i % nc)].get(), out, d_y.get(), nullptr);
  };
  d_y.poison();
  d_l.poison();
  launch(0);
  std::vector<float> dot;
  gemv_ref(x, T, in, W, out, dot);
  const auto got = logits ? d_l.download() : to_float(d_y.download());
  const auto c = compare(got, rounded(dot), kBf16Rtol, 1e-3);
  row(name, &c, time_us(launch), wbytes);
}

void bench_gemm(std::mt19937& rng, LtGemm& lt, const char* name, int T, int in, int out) {
  auto x = random_bf16(rng, size_t(T) * in);
  auto W = random_bf16(rng, size_t(out) * in, 0.05f);
  DeviceBuffer<bf16> d_x(x), d_W(W), d_y(size_t(T) * out);
  d_y.poison();
  auto launch = [&](int) { lt.gemm_bf16(d_x.get(), T, in, d_W.get(), out, d_y.get(), nullptr); };
  launch(0);
  // Check the first 16 token rows against the reference (the whole product is too slow on a CPU).
  const int Tc = std::min(T, 16);
  std::vector<bf16> xc(x.begin(), x.begin() + size_t(Tc) * in);
  std::vector<float> dot;
  gemv_ref(xc, Tc, in, W, out, dot);
  auto got = to_float(d_y.download());
  got.resize(size_t(Tc) * out);
  const auto c = compare(got, rounded(dot), kBf16Rtol, 1e-3);
  const double us = time_us(launch);
  char extra[64];
  std::snprintf(extra, sizeof extra, "%.0f TFLOP/s", 2.0 * T * in * out / (us * 1e-6) / 1e12);
  row(name, &c, us, double(in) * out * 2 + double(T) * (in + out) * 2, extra);
}

void bench_rmsnorm(std::mt19937& rng, int rows, int H) {
  auto x = random_bf16(rng, size_t(rows) * H);
  auto w = random_f32(rng, size_t(H), 1.f, 0.2f);
  DeviceBuffer<bf16> d_x(x), d_y(x.size());
  DeviceBuffer<float> d_w(w);
  d_y.poison();
  auto launch = [&](int) { rmsnorm(d_x.get(), d_w.get(), d_y.get(), rows, H, 1e-6f, nullptr); };
  launch(0);
  std::vector<bf16> ref;
  rmsnorm_ref(x, w, ref, rows, H, 1e-6f);
  const auto c = compare(d_y.download(), ref, kBf16Rtol, kBf16Atol);
  row("rmsnorm T=" + std::to_string(rows) + " H=" + std::to_string(H), &c, time_us(launch), 2.0 * x.size() * 2);
}

void bench_router_moe(std::mt19937& rng) {
  const int H = 2048, E = 256, I = 512, K = 6, Is = 512, T = 1;
  const RouterShape rs{H, E, K, true, 2.5f};
  auto x = random_bf16(rng, size_t(T) * H);
  auto wr = random_bf16(rng, size_t(E) * H, 0.03f);
  auto bias = random_f32(rng, size_t(E), 0.f, 0.05f);
  DeviceBuffer<bf16> d_x(x), d_wr(wr);
  DeviceBuffer<float> d_bias(bias), d_tw(size_t(T) * K);
  DeviceBuffer<int32_t> d_ids(size_t(T) * K);
  DeviceBuffer<float> d_logits(size_t(T) * E);
  d_ids.poison();
  auto route = [&](int) {
    router_topk(d_x.get(), T, rs, d_wr.get(), nullptr, d_bias.get(), d_logits.get(), d_ids.get(), d_tw.get(),
                nullptr);
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
                d_sact.get(), nullptr);
    moe_down_combine(d_act.get(), T, K, d_wd.get(), I, H, d_ids.get(), d_tw.get(), d_sact.get(), d_sd.get(), Is,
                     d_h.get(), nullptr);
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
                d_sact.get(), nullptr);
    moe_down_combine(d_act.get(), T, K, d_wd.get(), I, H, idp, d_tw.get(), d_sact.get(), d_sd.get(), Is, d_h.get(),
                     nullptr);
  };
  row("moe T=1 (6 routed + shared, 2 kern)", &cm, time_us(moe_rot), double(K + 1) * 3 * I * H * 2);
}

void bench_attention(std::mt19937& rng, const std::string& name, int ctx, int window, int unroll, int target) {
  const int nh = 32, nkv = 4, d = 128, B = 16;
  const int blocks = (ctx + B - 1) / B;
  const int keys = window > 0 ? std::min(ctx, window) : ctx;
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const size_t elems = size_t(blocks) * nkv * B * d;
  auto kc = random_bf16(rng, elems), vc = random_bf16(rng, elems);
  auto q = random_bf16(rng, size_t(nh) * d, 0.3f);
  auto sinks = random_f32(rng, size_t(nh), 0.f, 2.f);
  const AttentionShape shape{nh, nkv, d, B, window};
  std::vector<int32_t> pos = {ctx - 1}, off = {0};
  std::vector<bf16> ref;
  paged_attention_ref(q, kc, vc, &sinks, shape, pos, off, table, ref);
  // Rotate over several caches when the window is small enough to sit in L2.
  const double kv_bytes = double(keys) * nkv * d * 2 * 2;
  const int nc = window > 0 ? copies_for(double(elems) * 4) : 1;
  std::vector<DeviceBuffer<bf16>> ks, vs;
  for (int i = 0; i < nc; ++i) {
    ks.emplace_back(kc);
    vs.emplace_back(vc);
  }
  DeviceBuffer<bf16> d_q(q), d_out(ref.size());
  DeviceBuffer<float> d_sinks(sinks);
  DeviceBuffer<int32_t> d_pos(pos), d_off(off), d_tab(table);
  const int64_t records = nkv * 2048;
  DeviceBuffer<float> d_scr(size_t(records * attention_partial_floats(shape)));
  AttentionQueries qs{d_pos.get(), d_off.get(), d_tab.get(), 1, keys};
  auto launch = [&](int i) {
    paged_attention(d_q.get(), ks[size_t(i % nc)].get(), vs[size_t(i % nc)].get(), d_sinks.get(), shape, qs,
                    AttentionScratch{d_scr.get(), records, target}, d_out.get(), nullptr, unroll);
  };
  d_out.poison();
  launch(0);
  const auto c = compare(d_out.download(), ref, kBf16Rtol, kBf16Atol);
  row(name + (unroll <= 1 ? " mma" + std::to_string(unroll + 2) : " simt") + " t" + std::to_string(target), &c,
      time_us(launch), kv_bytes);
}

// Prefill attention of one T-token chunk from position 0 (Flint's shape: 32 query heads, 4 KV
// heads, d 128, block 16): the tensor-core prefill kernel and the decode kernel run over the
// same T queries (the old path). Checked against the CPU reference on 48 sampled queries (the
// last ones included) and new against old on every output. TFLOP/s counts the causal FLOPs
// (4·d per visible key, query head); GB/s counts the K/V cache once.
void bench_prefill_attention(std::mt19937& rng, const std::string& name, int T, int window, int sms) {
  const int nh = 32, nkv = 4, d = 128, B = 16;
  const int blocks = (T + B - 1) / B;
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const size_t elems = size_t(blocks) * nkv * B * d;
  auto kc = random_bf16(rng, elems), vc = random_bf16(rng, elems);
  auto q = random_bf16(rng, size_t(T) * nh * d, 0.3f);
  auto sinks = random_f32(rng, size_t(nh), 0.f, 2.f);
  const AttentionShape shape{nh, nkv, d, B, window};
  std::vector<int32_t> pos(static_cast<size_t>(T)), off(static_cast<size_t>(T), 0), tiles;
  std::iota(pos.begin(), pos.end(), 0);
  append_prefill_tiles(0, T, tiles);
  double flops = 0;
  for (int p = 0; p < T; ++p) flops += double(window > 0 ? std::min(p + 1, window) : p + 1) * nh * d * 4;
  const int keys = window > 0 ? std::min(T, window) : T;
  // Reference on sampled queries.
  std::vector<int32_t> sample_pos, sample_off;
  std::vector<bf16> sample_q;
  for (int i = 0; i < 48; ++i) {
    const int p = i < 16 ? T - 1 - i : int(int64_t(T) * (i - 16) / 32);
    sample_pos.push_back(p);
    sample_off.push_back(0);
    sample_q.insert(sample_q.end(), q.begin() + int64_t(p) * nh * d, q.begin() + int64_t(p + 1) * nh * d);
  }
  std::vector<bf16> ref;
  paged_attention_ref(sample_q, kc, vc, &sinks, shape, sample_pos, sample_off, table, ref);
  DeviceBuffer<bf16> d_q(q), d_k(kc), d_v(vc), d_new(size_t(T) * nh * d), d_old(size_t(T) * nh * d);
  DeviceBuffer<float> d_sinks(sinks);
  DeviceBuffer<int32_t> d_pos(pos), d_off(off), d_tab(table), d_tiles(tiles);
  const int64_t records = int64_t(T) * nkv * 2;
  DeviceBuffer<float> d_scr(size_t(records * attention_partial_floats(shape)));
  const AttentionQueries qs{d_pos.get(), d_off.get(), d_tab.get(), T, keys};
  const AttentionScratch scratch{d_scr.get(), records, int64_t(3) * sms};  // as CudaBackend sets it
  auto run_new = [&](int) {
    prefill_attention(d_q.get(), d_k.get(), d_v.get(), d_sinks.get(), shape, qs,
                      PrefillTiles{d_tiles.get(), int(tiles.size() / 2)}, scratch, d_new.get(), nullptr);
  };
  auto run_old = [&](int) {
    paged_attention(d_q.get(), d_k.get(), d_v.get(), d_sinks.get(), shape, qs, scratch, d_old.get(), nullptr, 1);
  };
  auto sampled = [&](const std::vector<bf16>& out) {
    std::vector<bf16> s;
    for (int p : sample_pos) s.insert(s.end(), out.begin() + int64_t(p) * nh * d, out.begin() + int64_t(p + 1) * nh * d);
    return s;
  };
  d_new.poison();
  d_old.poison();
  run_new(0);
  run_old(0);
  const auto got_new = d_new.download(), got_old = d_old.download();
  const auto c_new = compare(sampled(got_new), ref, kBf16Rtol, kBf16Atol);
  const auto c_old = compare(sampled(got_old), ref, kBf16Rtol, kBf16Atol);
  const auto c_pair = compare(got_new, got_old, 2 * kBf16Rtol, 2 * kBf16Atol);
  const double kv_bytes = double(elems) * 2 * 2;
  char extra[96];
  const double us_new = time_us(run_new), us_old = time_us(run_old);
  std::snprintf(extra, sizeof extra, "%.1f TFLOP/s causal; new vs old on all rows: %s %.3f",
                flops / (us_new * 1e-6) / 1e12, c_pair.ok() ? "PASS" : "FAIL", c_pair.max_ratio);
  if (!c_pair.ok()) ++g_failures;
  row(name + " (prefill kernel)", &c_new, us_new, kv_bytes, extra);
  std::snprintf(extra, sizeof extra, "%.1f TFLOP/s causal", flops / (us_old * 1e-6) / 1e12);
  row(name + " (decode kernel)", &c_old, us_old, kv_bytes, extra);
}

void bench_qk_rope(std::mt19937& rng) {
  const HeadShape hs{32, 4, 128};
  const int T = 1, B = 16;
  auto qkv = random_bf16(rng, size_t(T) * 40 * 128);
  auto qw = random_f32(rng, 128, 1.f, 0.2f), kw = random_f32(rng, 128, 1.f, 0.2f);
  const auto inv = rope_inv_freq(10000.f, 128);
  std::vector<int32_t> pos = {99999};
  std::vector<int64_t> slots = {99999};
  const size_t cache = size_t(100000 / B + 1) * 4 * B * 128;
  DeviceBuffer<bf16> d_qkv(qkv), d_k(cache), d_v(cache), d_q(size_t(T) * 32 * 128);
  DeviceBuffer<float> d_qw(qw), d_kw(kw), d_inv(inv);
  DeviceBuffer<int32_t> d_pos(pos);
  DeviceBuffer<int64_t> d_slots(slots);
  d_q.poison();
  auto launch = [&](int) {
    qk_norm_rope_kv_write(d_qkv.get(), T, hs, d_qw.get(), d_kw.get(), 1e-6f, d_pos.get(), d_inv.get(), d_slots.get(),
                          B, d_k.get(), d_v.get(), d_q.get(), nullptr);
  };
  launch(0);
  std::vector<bf16> rk(cache), rv(cache), rq;
  qk_norm_rope_kv_write_ref(qkv, T, hs, qw, kw, 1e-6f, pos, &inv, slots, B, rk, rv, rq);
  const auto c = compare(d_q.download(), rq, 2 * kBf16Rtol, kBf16Atol);
  row("qk norm+rope+kv write T=1 p=99999", &c, time_us(launch), double(qkv.size()) * 2 * 2);
}

void bench_embedding(std::mt19937& rng) {
  const int64_t V = 151552, H = 2048;
  auto table = random_bf16(rng, size_t(V * H));
  DeviceBuffer<bf16> d_t(table), d_out(static_cast<size_t>(H));
  std::vector<int32_t> ids = {123457};
  DeviceBuffer<int32_t> d_ids(ids);
  d_out.poison();
  auto launch = [&](int) { embedding_gather(d_t.get(), V, H, d_ids.get(), 1, d_out.get(), nullptr); };
  launch(0);
  std::vector<bf16> ref;
  embedding_gather_ref(table, V, H, ids, ref);
  const auto c = compare(d_out.download(), ref, 0.0, 0.0);
  row("embedding T=1", &c, time_us(launch), double(H) * 2 * 2);
}


// Routed experts of a T-token step at full size (E 256, top-6, H 2048, I 512; no shared
// expert): the device-side grouped path (sort, gate/up + SwiGLU, down, combine) kernel by
// kernel and in all, then the path it replaced (routing read back, host counting sort, three
// cuBLASLt GEMMs per active expert). GB/s counts the weights of the experts the routing touches;
// the check compares h of the first 4 tokens with moe_ref.
void bench_moe_grouped(std::mt19937& rng, LtGemm& lt, int T) {
  const int E = 256, H = 2048, I = 512, K = 6, S = T * K;
  const int64_t expert_elems = int64_t(E) * I * H;
  const auto n_w = static_cast<size_t>(expert_elems);
  DeviceBuffer<bf16> d_wg(n_w), d_wu(n_w), d_wd(n_w);
  fill_random_bf16(d_wg.get(), expert_elems, 11, 0.f, 0.03f, nullptr);
  fill_random_bf16(d_wu.get(), expert_elems, 12, 0.f, 0.03f, nullptr);
  fill_random_bf16(d_wd.get(), expert_elems, 13, 0.f, 0.03f, nullptr);
  const auto ids = make_routing(rng, RoutingKind::uniform, T, K, E);
  const auto tw = random_f32(rng, ids.size(), 0.4f, 0.2f);
  const auto x = random_bf16(rng, size_t(T) * H);
  const auto h0 = random_bf16(rng, size_t(T) * H);
  const int tm = moe_tile_rows_for(S, E);
  DeviceBuffer<int32_t> d_ids(ids), d_sorted(static_cast<size_t>(S)), d_row(static_cast<size_t>(S)), d_num(1);
  DeviceBuffer<MoeTile> d_tiles(static_cast<size_t>(moe_max_tiles(S, E, tm)));
  const MoeRouting r{d_sorted.get(), d_row.get(), d_tiles.get(), d_num.get(), E, tm};
  DeviceBuffer<bf16> d_x(x), d_h(h0), d_act(size_t(S) * I), d_y(size_t(S) * H);
  DeviceBuffer<float> d_tw(tw);
  d_act.poison();
  d_y.poison();
  auto sort = [&](int) { moe_route_sort(d_ids.get(), T, K, r, nullptr); };
  auto gate_up = [&](int) {
    moe_grouped_gate_up(d_x.get(), T, K, H, d_wg.get(), d_wu.get(), I, r, d_act.get(), nullptr);
  };
  auto down = [&](int) { moe_grouped_down(d_act.get(), T, K, I, d_wd.get(), H, r, d_y.get(), nullptr); };
  auto combine = [&](int) {
    moe_combine_sorted(d_y.get(), d_row.get(), d_tw.get(), nullptr, T, K, H, d_h.get(), nullptr);
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
    embedding_gather(d_x.get(), T, H, d_sort.get(), S, d_xs.get(), nullptr);
    for (int e = 0; e < E; ++e) {
      const int n = offset[size_t(e) + 1] - offset[size_t(e)], off = offset[size_t(e)];
      if (n == 0) continue;
      const bf16* xs = d_xs.get() + int64_t(off) * H;
      lt.gemm_bf16(xs, n, H, d_wg.get() + int64_t(e) * I * H, I, d_g.get() + int64_t(off) * I, nullptr);
      lt.gemm_bf16(xs, n, H, d_wu.get() + int64_t(e) * I * H, I, d_u.get() + int64_t(off) * I, nullptr);
    }
    swiglu_act(d_g.get(), d_u.get(), d_act.get(), int64_t(S) * I, nullptr);
    for (int e = 0; e < E; ++e) {
      const int n = offset[size_t(e) + 1] - offset[size_t(e)], off = offset[size_t(e)];
      if (n == 0) continue;
      lt.gemm_bf16(d_act.get() + int64_t(off) * I, n, I, d_wd.get() + int64_t(e) * H * I, H,
                   d_y.get() + int64_t(off) * H, nullptr);
    }
    combine(0);
  };
  const double us_old = time_us(old_path);
  row("moe old (host sort, cuBLASLt/expert) T=" + std::to_string(T), nullptr, us_old, active * 3 * mat,
      tflops(flops, us_old));
}

// NVFP4 (W4A16): weight bytes are codes (in/2) + scale bytes (in/16) per row.
double nvfp4_bytes(double rows, double in) { return rows * in * (0.5 + 1.0 / 16); }

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
    if (logits) nvfp4_gemv_logits(d_x.get(), T, in, m, s2, out, d_l.get(), nullptr);
    else nvfp4_gemv(d_x.get(), T, in, m, s2, out, d_y.get(), nullptr);
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

// Routed experts of one decode token: 6 of 256 NVFP4 experts + an NVFP4 shared expert, the
// routing rotated over 16 expert sets so the weights are not L2 hits.
void bench_nvfp4_moe(std::mt19937& rng) {
  const int H = 2048, I = 512, Is = 512, E = 256, K = 6, T = 1;
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
  auto x = random_bf16(rng, size_t(H), 1.f);
  DeviceBuffer<bf16> d_x(x), d_h(static_cast<size_t>(H)), d_act(size_t(K) * I), d_sact(static_cast<size_t>(Is));
  const std::vector<float> tw(size_t(K), 0.4f);
  DeviceBuffer<float> d_tw(tw);
  std::vector<DeviceBuffer<int32_t>> routings;
  for (int r = 0; r < 16; ++r) {
    std::vector<int32_t> ids_r(static_cast<size_t>(K));
    for (int k = 0; k < K; ++k) ids_r[size_t(k)] = (r * K + k) * 5 % E;
    routings.emplace_back(ids_r);
  }
  auto moe = [&](int i) {
    const int32_t* idp = routings[size_t(i % 16)].get();
    nvfp4_moe_gate_up(d_x.get(), T, H, gst, ust, I, idp, K, d_act.get(), &sh, d_sact.get(), nullptr);
    nvfp4_moe_down_combine(d_act.get(), T, K, dst, I, H, idp, d_tw.get(), &sh, d_sact.get(), nullptr, d_h.get(),
                           nullptr);
  };
  STRIKER_CUDA_CHECK(cudaMemset(d_h.get(), 0, size_t(H) * 2));
  row("nvfp4 moe T=1 (6 routed + shared)", nullptr, time_us(moe), double(K + 1) * 3 * nvfp4_bytes(I, H));
}

// Full-size NVFP4 expert stacks (E 256, H 2048, I 512), filled on the device once for every T.
struct Nvfp4ExpertStacks {
  static constexpr int E = 256, H = 2048, I = 512;
  DeviceBuffer<uint8_t> codes[3], scales[3];  // gate, up [E·I, H]; down [E·H, I]
  std::vector<float> s2[3];
  DeviceBuffer<float> d_s2[3];
  Nvfp4ExpertStacks() {
    for (int m = 0; m < 3; ++m) {
      const int64_t rows = int64_t(E) * (m < 2 ? I : H);
      const int in = m < 2 ? H : I;
      codes[m] = DeviceBuffer<uint8_t>(size_t(rows) * size_t(in / 2));
      scales[m] = DeviceBuffer<uint8_t>(size_t(rows) * size_t(in / 16));
      nvfp4_fill_random(codes[m].get(), scales[m].get(), rows, in, 31 + uint64_t(m), 0x30, 0x3F, nullptr);
      for (int e = 0; e < E; ++e) s2[m].push_back(e % 2 ? 0.0021f * (1 + e % 5) : std::ldexp(1.f, -8 - e % 3));
      d_s2[m] = DeviceBuffer<float>(s2[m]);
    }
  }
  Nvfp4Stack stack(int m) const { return {{codes[m].get(), scales[m].get()}, d_s2[m].get()}; }
  // Host copy of matrix m of the listed experts, as floats with scale2 applied (moe_float_ref input).
  std::vector<float> host_floats(int m, const std::vector<int32_t>& experts) const {
    const int64_t rows = m < 2 ? I : H, in = m < 2 ? H : I;
    std::vector<float> out;
    for (int32_t e : experts) {
      Nvfp4HostMatrix hm;
      hm.codes.resize(size_t(rows * in / 2));
      hm.scales.resize(size_t(rows * in / 16));
      STRIKER_CUDA_CHECK(cudaMemcpy(hm.codes.data(), codes[m].get() + e * rows * in / 2, hm.codes.size(),
                                    cudaMemcpyDeviceToHost));
      STRIKER_CUDA_CHECK(cudaMemcpy(hm.scales.data(), scales[m].get() + e * rows * in / 16, hm.scales.size(),
                                    cudaMemcpyDeviceToHost));
      for (float v : nvfp4_dequantize_ref(hm, rows, int(in))) out.push_back(v * s2[m][size_t(e)]);
    }
    return out;
  }
};

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
  DeviceBuffer<int32_t> d_ids(ids), d_sorted(static_cast<size_t>(S)), d_row(static_cast<size_t>(S)), d_num(1);
  DeviceBuffer<MoeTile> d_tiles(static_cast<size_t>(moe_max_tiles(S, E, tm)));
  const MoeRouting r{d_sorted.get(), d_row.get(), d_tiles.get(), d_num.get(), E, tm};
  DeviceBuffer<bf16> d_x(x), d_h(h0), d_act(size_t(S) * I), d_y(size_t(S) * H);
  DeviceBuffer<float> d_tw(tw);
  d_act.poison();
  d_y.poison();
  auto sort = [&](int) { moe_route_sort(d_ids.get(), T, K, r, nullptr); };
  auto gate_up = [&](int) {
    moe_grouped_gate_up_nvfp4(d_x.get(), T, K, H, w.stack(0), w.stack(1), I, r, d_act.get(), nullptr);
  };
  auto down = [&](int) { moe_grouped_down_nvfp4(d_act.get(), T, K, I, w.stack(2), H, r, d_y.get(), nullptr); };
  auto all = [&](int i) {
    sort(i);
    gate_up(i);
    down(i);
    moe_combine_sorted(d_y.get(), d_row.get(), d_tw.get(), nullptr, T, K, H, d_h.get(), nullptr);
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
}

// Prefill projection: dequantise into the scratch + cuBLASLt with alpha = scale2.
void bench_nvfp4_gemm(std::mt19937& rng, LtGemm& lt, const char* name, int T, int in, int out) {
  auto x = random_bf16(rng, size_t(T) * in);
  const auto W = random_nvfp4(rng, out, in);
  DeviceBuffer<uint8_t> c(W.codes), sc(W.scales);
  DeviceBuffer<bf16> d_x(x), d_y(size_t(T) * out), d_scratch(size_t(out) * in);
  auto launch = [&](int) {
    nvfp4_gemm(lt, d_x.get(), T, in, {c.get(), sc.get()}, RowScale2::uniform(0.01f), out, d_y.get(), out,
               {d_scratch.get(), int64_t(out) * in}, nullptr);
  };
  const double us = time_us(launch);
  char extra[64];
  std::snprintf(extra, sizeof extra, "%.0f TFLOP/s", 2.0 * T * in * out / (us * 1e-6) / 1e12);
  row(name, nullptr, us, nvfp4_bytes(out, in) + double(out) * in * 4 + double(T) * (in + out) * 2, extra);
}

}  // namespace

int main() {
  try {
    std::printf("device: %s\n", device_summary().c_str());
    if (device_count() == 0) {
      std::printf("no GPU: nothing measured\n");
      return 2;
    }
    std::mt19937 rng(2026);
    std::printf("| %-34s | %-10s | %9s | %8s | %5s |\n", "kernel", "check", "us", "GB/s", "/4.1T");
    bench_copy();
    bench_embedding(rng);
    bench_rmsnorm(rng, 1, 2048);
    bench_qk_rope(rng);
    bench_gemv(rng, "gemv qkv 5120x2048 T=1", 1, 2048, 5120, false);
    bench_gemv(rng, "gemv qkv 5120x2048 T=8", 8, 2048, 5120, false);
    bench_gemv(rng, "gemv o_proj 2048x4096 T=1", 1, 4096, 2048, false);
    bench_gemv(rng, "gemv dense down 2048x8192 T=1", 1, 8192, 2048, false);
    bench_gemv(rng, "gemv expert down 2048x512 T=1", 1, 512, 2048, false);
    bench_gemv(rng, "lm_head 151552x2048 T=1 (fp32 out)", 1, 2048, 151552, true);
    bench_router_moe(rng);
    int sms = 0;
    STRIKER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    for (auto [u, t] : {std::pair{1, 3 * sms}, {1, 0}, {0, 2 * sms}, {4, 0}}) {
      bench_attention(rng, "attn full ctx=8192", 8192, 0, u, t);
      bench_attention(rng, "attn full ctx=100000", 100000, 0, u, t);
      bench_attention(rng, "attn sliding W=513", 100000, 513, u, t);
    }
    bench_prefill_attention(rng, "prefill attention full 8192 tokens", 8192, 0, sms);
    bench_prefill_attention(rng, "sliding W=513 8192 tokens", 8192, 513, sms);
    LtGemm lt;
    bench_gemm(rng, lt, "gemm qkv T=8192 (cuBLASLt)", 8192, 2048, 5120);
    bench_gemm(rng, lt, "gemm dense up T=8192 (cuBLASLt)", 8192, 2048, 8192);
    for (int T : {16, 64, 256, 8192}) bench_moe_grouped(rng, lt, T);
    {
      const Nvfp4ExpertStacks stacks;
      for (int T : {16, 64, 256, 8192}) bench_nvfp4_moe_grouped(rng, stacks, T);
    }
    bench_nvfp4_gemv(rng, "nvfp4 gemv qkv 5120x2048 T=1", 1, 2048, 5120, false);
    bench_nvfp4_gemv(rng, "nvfp4 gemv qkv 5120x2048 T=8", 8, 2048, 5120, false);
    bench_nvfp4_gemv(rng, "nvfp4 gemv o_proj 2048x4096 T=1", 1, 4096, 2048, false);
    bench_nvfp4_gemv(rng, "nvfp4 gemv dense down 2048x8192 T=1", 1, 8192, 2048, false);
    bench_nvfp4_gemv(rng, "nvfp4 lm_head 151552x2048 T=1", 1, 2048, 151552, true);
    bench_nvfp4_moe(rng);
    bench_nvfp4_gemm(rng, lt, "nvfp4 gemm qkv T=8192 (deq+Lt)", 8192, 2048, 5120);
    std::printf("kernel checks failed: %d\n", g_failures);
    return g_failures == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
