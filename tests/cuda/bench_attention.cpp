// Attention benchmarks: q/k norm + RoPE + KV write, split-KV decode attention, and the
// tensor-core prefill attention beside the decode kernel over the same queries.
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
#include "backends/cuda/attention/attention.h"
#include "backends/cuda/attention/attention_decode_layout.h"
#include "backends/cuda/elementwise/elementwise.h"
#include "backends/cuda/attention/qk_rope_kv.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {

void bench_attention(std::mt19937& rng, const std::string& name, int ctx, int window, int target, int seqs,
                     int max_keys) {
  const int nh = 32, nkv = 4, d = 128, B = 16;
  const int blocks = (ctx + B - 1) / B;  // per sequence
  const int keys = window > 0 ? std::min(ctx, window) : ctx;
  std::vector<int32_t> table(size_t(blocks) * seqs);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const size_t elems = table.size() * nkv * B * d;
  auto kc = random_bf16(rng, elems), vc = random_bf16(rng, elems);
  auto q = random_bf16(rng, size_t(seqs) * nh * d, 0.3f);
  auto sinks = random_f32(rng, size_t(nh), 0.f, 2.f);
  const AttentionShape shape{nh, nkv, d, B, window};
  std::vector<int32_t> pos(static_cast<size_t>(seqs), ctx - 1), off(static_cast<size_t>(seqs));
  for (int s = 0; s < seqs; ++s) off[size_t(s)] = s * blocks;  // one decode query per sequence
  std::vector<bf16> ref;
  paged_attention_ref(q, kc, vc, &sinks, shape, pos, off, table, ref);
  // Rotate over several caches when the window is small enough to sit in L2.
  const double kv_bytes = double(keys) * nkv * d * 2 * 2 * seqs;
  const int nc = window > 0 ? copies_for(double(elems) * 4) : 1;
  std::vector<DeviceBuffer<bf16>> ks, vs;
  for (int i = 0; i < nc; ++i) {
    ks.emplace_back(kc);
    vs.emplace_back(vc);
  }
  DeviceBuffer<bf16> d_q(q), d_out(ref.size());
  DeviceBuffer<float> d_sinks(sinks);
  DeviceBuffer<int32_t> d_pos(pos), d_off(off), d_tab(table);
  const int64_t records = int64_t(nkv) * 2048 * seqs;
  DeviceBuffer<float> d_scr(size_t(records * attention_partial_floats(shape)));
  AttentionQueries qs{d_pos.get(), d_off.get(), d_tab.get(), seqs, max_keys > 0 ? max_keys : keys};
  auto launch = [&](int i) {
    paged_attention(d_q.get(), ks[size_t(i % nc)].get(), vs[size_t(i % nc)].get(), d_sinks.get(), shape, qs,
                    AttentionScratch{d_scr.get(), records, target}, d_out.get(), bench_stream());
  };
  d_out.poison();
  launch(0);
  const auto c = compare(d_out.download(), ref, kBf16Rtol, kBf16Atol);
  row(name + " t" + std::to_string(target), &c, time_us(launch), kv_bytes);
}

// Prefill attention of one T-token chunk at positions prefix..prefix+T-1 over a cached prefix
// (Flint's shape: 32 query heads, 4 KV heads, d 128, block 16): the prefill kernel, and for a
// chunk from position 0 the decode kernel over the same T queries (the old path). Each is checked
// against the CPU reference on sampled queries (the last ones included), and the two against each
// other on every output. TFLOP/s counts the causal FLOPs (4·d per visible key and query head), as
// a fraction of the H200's measured dense bf16 peak (774 TFLOP/s); GB/s counts the K/V cache once.
void bench_prefill_attention(std::mt19937& rng, const std::string& name, int T, int prefix, int window, int sms) {
  constexpr double kPeakTflops = 774.0;
  const int nh = 32, nkv = 4, d = 128, B = 16;
  const int len = prefix + T;
  const int blocks = (len + B - 1) / B;
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  const size_t elems = size_t(blocks) * nkv * B * d;
  auto kc = random_bf16(rng, elems), vc = random_bf16(rng, elems);
  auto q = random_bf16(rng, size_t(T) * nh * d, 0.3f);
  auto sinks = random_f32(rng, size_t(nh), 0.f, 2.f);
  const AttentionShape shape{nh, nkv, d, B, window};
  std::vector<int32_t> pos(static_cast<size_t>(T)), off(static_cast<size_t>(T), 0), tiles;
  std::iota(pos.begin(), pos.end(), prefix);
  append_prefill_tiles(0, T, tiles);
  double flops = 0;
  for (int p = prefix; p < len; ++p) flops += double(window > 0 ? std::min(p + 1, window) : p + 1) * nh * d * 4;
  const int keys = window > 0 ? std::min(len, window) : len;
  // Reference on sampled queries (fewer over a long prefix: the CPU reference is O(keys)).
  const int samples = prefix > 0 ? 12 : 48, last = samples / 3;
  std::vector<int32_t> sample_pos, sample_off, sample_row;
  std::vector<bf16> sample_q;
  for (int i = 0; i < samples; ++i) {
    const int r = i < last ? T - 1 - i : int(int64_t(T) * (i - last) / (samples - last));
    sample_row.push_back(r);
    sample_pos.push_back(prefix + r);
    sample_off.push_back(0);
    sample_q.insert(sample_q.end(), q.begin() + int64_t(r) * nh * d, q.begin() + int64_t(r + 1) * nh * d);
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
                      PrefillTiles{d_tiles.get(), int(tiles.size() / 2)}, scratch, d_new.get(), bench_stream());
  };
  auto sampled = [&](const std::vector<bf16>& out) {
    std::vector<bf16> s;
    for (int r : sample_row) s.insert(s.end(), out.begin() + int64_t(r) * nh * d, out.begin() + int64_t(r + 1) * nh * d);
    return s;
  };
  const double kv_bytes = double(keys) * nkv * d * 2 * 2;
  auto report = [&](const std::string& label, DeviceBuffer<bf16>& out, const std::function<void(int)>& run,
                    const std::string& note) {
    out.poison();
    run(0);
    const auto c = compare(sampled(out.download()), ref, kBf16Rtol, kBf16Atol);
    const double us = time_us(run), tflops = flops / (us * 1e-6) / 1e12;
    char extra[160];
    std::snprintf(extra, sizeof extra, "%.3f ms, %.1f TFLOP/s causal = %.2f of %.0f%s", us * 1e-3, tflops,
                  tflops / kPeakTflops, kPeakTflops, note.c_str());
    row(name + " (" + label + ")", &c, us, kv_bytes, extra);
  };
  report("prefill kernel", d_new, run_new, "");
  if (prefix > 0) return;  // the decode kernel over a long prefix would take minutes
  auto run_old = [&](int) {
    paged_attention(d_q.get(), d_k.get(), d_v.get(), d_sinks.get(), shape, qs, scratch, d_old.get(), bench_stream());
  };
  d_old.poison();
  run_old(0);
  const auto c_pair = compare(d_new.download(), d_old.download(), 2 * kBf16Rtol, 2 * kBf16Atol);
  if (!c_pair.ok()) count_kernel_check_failure();
  char pair[96];
  std::snprintf(pair, sizeof pair, "; vs prefill kernel on all rows: %s %.3f", c_pair.ok() ? "PASS" : "FAIL",
                c_pair.max_ratio);
  report("decode kernel", d_old, run_old, pair);
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
                          B, d_k.get(), d_v.get(), d_q.get(), bench_stream());
  };
  launch(0);
  std::vector<bf16> rk(cache), rv(cache), rq;
  qk_norm_rope_kv_write_ref(qkv, T, hs, qw, kw, 1e-6f, pos, &inv, slots, B, rk, rv, rq);
  const auto c = compare(d_q.download(), rq, 2 * kBf16Rtol, kBf16Atol);
  row("qk norm+rope+kv write T=1 p=99999", &c, time_us(launch), double(qkv.size()) * 2 * 2);
}

}  // namespace striker::cuda::testing
