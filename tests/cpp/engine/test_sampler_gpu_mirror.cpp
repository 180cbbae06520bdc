// A sequential mirror of the GPU sampling kernel's algorithm (src/backends/cuda/sampling.cu:
// radix select for top_k, mass-weighted radix select for top_p, lowest-id tie splits, the
// race over the kept set), checked against the CPU sampler on bf16-rounded logits full of
// ties. CI has no GPU: this proves the selection logic here; tests/cuda/test_sampling.cpp runs
// the kernel itself against the same sampler on the H200. Keep the two in step.
#include <gtest/gtest.h>

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "backends/sample_math.h"
#include "core/bf16.h"
#include "engine/sampler.h"

using namespace striker;
namespace sm = striker::sample_math;

namespace {

// The kernel's per-row parameters, derived from a SampleRequest as pack_samples does.
struct SampleRowParams {
  bool greedy, has_min_p;
  int32_t top_k;
  float temperature, inv_t, top_p, log_min_p;
  uint64_t key;
};
SampleRowParams row_params(const SampleRequest& r, int64_t vocab) {
  SampleRowParams q;
  q.greedy = r.temperature < 1e-5f;
  q.top_k = r.top_k > 0 && int64_t(r.top_k) < vocab ? r.top_k : 0;
  q.has_min_p = r.min_p > 0;
  q.temperature = r.temperature;
  q.inv_t = q.greedy ? 0.f : 1.0f / r.temperature;
  q.top_p = r.top_p;
  q.log_min_p = q.has_min_p ? sm::min_p_log(r.min_p) : 0.f;
  q.key = sm::race_key(r.seed, uint64_t(r.choice), uint64_t(r.step));
  return q;
}

struct Cut { bool on; uint32_t key; int32_t id_limit; };
bool passes(const Cut& c, uint32_t key, int32_t i) { return !c.on || key > c.key || (key == c.key && i <= c.id_limit); }
int nth_tied(const float* x, int V, float floor, Cut cut, uint32_t key, int n) {
  for (int i = 0; i < V; ++i) { float v = x[i]; if (v >= floor && sm::order_key(v) == key && passes(cut, key, i)) if (--n == 0) return i; }
  return INT_MAX;
}
int mirror_sample(const float* x, int V, const SampleRowParams& p) {
  float m = -INFINITY; int am = INT_MAX;
  for (int i = 0; i < V; ++i) { float v = x[i]; if (v == v && (v > m || (v == m && i < am))) m = v, am = i; }
  if (p.greedy || !std::isfinite(m)) return am == INT_MAX ? 0 : am;
  const float floor = p.has_min_p ? sm::min_p_floor(m, p.temperature, p.log_min_p) : -FLT_MAX;
  const float inv_t = p.inv_t;
  Cut ck{false, 0, INT_MAX};
  if (p.top_k > 0) {
    uint32_t prefix = 0, pmask = 0; int remaining = p.top_k, tie_count = 0; bool cut = true;
    for (int pass = 0; pass < 4; ++pass) {
      int shift = 24 - 8 * pass; unsigned cnt[256] = {0};
      for (int i = 0; i < V; ++i) { float v = x[i]; uint32_t key = sm::order_key(v); if (v >= floor && (key & pmask) == prefix) cnt[(key >> shift) & 255]++; }
      int acc = 0, sel = -1, selc = 0, nth = 0;
      for (int b = 255; b >= 0; --b) { int c = cnt[b]; if (sel < 0 && acc + c >= remaining) sel = b, selc = c, nth = remaining - acc; if (sel < 0) acc += c; }
      if (sel < 0) { cut = false; break; }
      prefix |= uint32_t(sel) << shift; pmask |= 0xFFu << shift; remaining = nth; tie_count = selc;
    }
    if (cut) ck = Cut{true, prefix, tie_count > remaining ? nth_tied(x, V, floor, Cut{false,0,INT_MAX}, prefix, remaining) : INT_MAX};
  }
  Cut cp{false, 0, INT_MAX};
  if (p.top_p < 1.0f) {
    uint32_t prefix = 0, pmask = 0; double above = 0, target = 0; int tie_count = 0;
    for (int pass = 0; pass < 4; ++pass) {
      int shift = 24 - 8 * pass; unsigned cnt[256] = {0}; double mass[256] = {0};
      for (int i = 0; i < V; ++i) { float v = x[i]; uint32_t key = sm::order_key(v);
        if (v >= floor && passes(ck, key, i) && (key & pmask) == prefix) { int b = (key >> shift) & 255; cnt[b]++; mass[b] += std::exp(double(sm::tempered(v, m, inv_t))); } }
      if (pass == 0) { double total = 0; for (int b = 255; b >= 0; --b) total += mass[b]; target = double(p.top_p) * total; }
      double acc = 0, acc_before_last = 0; int last_nonempty = -1, sel = -1; double sel_above = 0;
      for (int b = 255; b >= 0 && sel < 0; --b) { if (cnt[b] == 0) continue;
        if (above + acc + mass[b] >= target) { sel = b; sel_above = above + acc; } else { last_nonempty = b; acc_before_last = acc; acc += mass[b]; } }
      if (sel < 0) sel = last_nonempty, sel_above = above + acc_before_last;
      tie_count = sel >= 0 ? cnt[sel] : 0;
      prefix |= uint32_t(sel) << shift; pmask |= 0xFFu << shift; above = sel_above;
    }
    double w = std::exp(double(sm::tempered(sm::key_float(prefix), m, inv_t)));
    double q = (target - above) / w;
    int keep = q >= double(tie_count) ? tie_count : std::max(1, int(std::ceil(q)));
    cp = Cut{true, prefix, tie_count > keep ? nth_tied(x, V, floor, ck, prefix, keep) : INT_MAX};
  }
  float best = -INFINITY; int best_id = INT_MAX;
  for (int i = 0; i < V; ++i) { float v = x[i]; if (!(v >= floor)) continue; uint32_t key = sm::order_key(v);
    if (!passes(ck, key, i) || !passes(cp, key, i)) continue; float s = sm::race_score(v, m, inv_t, p.key, i);
    if (s > best || (s == best && i < best_id)) best = s, best_id = i; }
  return best_id == INT_MAX ? am : best_id;
}

float bf16r(float f) { return bf16_to_float(float_to_bf16(f)); }

// Kinds of rows: 0 plain, 1 coarse (steps of 0.25: ties everywhere, also on every cut),
// 2 peaked (a tied group well above the rest), 3 with -inf and NaN entries.
std::vector<float> make_row(std::mt19937& rng, int64_t V, int kind) {
  std::normal_distribution<float> nd(0.f, kind == 2 ? 1.f : 3.f);
  std::vector<float> x(static_cast<size_t>(V));
  for (auto& v : x) v = bf16r(kind == 1 ? std::round(nd(rng) * 4.f) / 4.f : nd(rng));
  if (kind == 2) {
    const float top = bf16r(12.f + float(rng() % 4));
    for (int j = 0; j < 5; ++j) x[rng() % size_t(V)] = top;
    for (int j = 0; j < 20; ++j) x[rng() % size_t(V)] = bf16r(top - 1.f - float(rng() % 3));
  }
  if (kind == 3) {
    for (int j = 0; j < 50; ++j) x[rng() % size_t(V)] = -std::numeric_limits<float>::infinity();
    x[rng() % size_t(V)] = std::numeric_limits<float>::quiet_NaN();
  }
  return x;
}

template <typename T>
T pick(std::mt19937& rng, std::initializer_list<T> options) {
  return *(options.begin() + rng() % options.size());
}

std::vector<int32_t> unique_ids(std::mt19937& rng, int64_t V, int n) {
  n = int(std::min<int64_t>(n, V / 2));  // a small vocabulary cannot hold n distinct ids
  std::set<int32_t> s;
  while (int(s.size()) < n) s.insert(int32_t(rng() % uint64_t(V)));
  return {s.begin(), s.end()};
}

SampleRequest random_request(std::mt19937& rng, int64_t V, int32_t row) {
  SampleRequest r;
  r.row = row;
  r.temperature = pick(rng, {0.f, 0.3f, 0.7f, 1.f, 1.f, 1.5f});
  r.top_k = pick<int32_t>(rng, {0, 0, 1, 2, 7, 50, 600, int32_t(V) + 5});
  r.top_p = pick(rng, {1.f, 1.f, 0.95f, 0.8f, 0.5f, 0.2f, 0.01f});
  r.min_p = pick(rng, {0.f, 0.f, 0.02f, 0.2f});
  r.repetition_penalty = pick(rng, {1.f, 1.f, 1.2f, 0.8f});
  r.frequency_penalty = pick(rng, {0.f, 0.5f, -0.3f});
  r.presence_penalty = pick(rng, {0.f, 0.4f});
  r.seed = rng();
  r.choice = int32_t(rng() % 4);
  r.step = int64_t(rng() % 1000);
  for (int32_t id : unique_ids(rng, V, int(rng() % 6)))
    r.logit_bias.emplace_back(id, float(int(rng() % 21) - 10) * 0.5f);
  for (int32_t id : unique_ids(rng, V, int(rng() % 20))) r.output_counts.emplace_back(id, int32_t(1 + rng() % 4));
  if (r.repetition_penalty != 1.f) r.prompt_tokens = unique_ids(rng, V, int(rng() % 50));
  r.suppressed = unique_ids(rng, V, int(rng() % 4));
  return r;
}


}  // namespace

TEST(SamplerGpuMirror, KernelAlgorithmDrawsTheCpuSamplersTokens) {
  std::mt19937 rng(5);
  int rows = 0, exact = 0, boundary = 0;
  std::vector<float> scratch, processed;
  for (int64_t V : {37L, 4099L, 20011L}) {
    for (int it = 0; it < (V > 5000 ? 300 : 1500); ++it) {
      const int kind = int(rng() % 4);
      const auto x = make_row(rng, V, kind);
      const SampleRequest r = random_request(rng, V, 0);
      process_logits(x, r, processed);
      const int got = mirror_sample(processed.data(), int(V), row_params(r, V));
      SampleDiagnostics diag;
      const int want = sample_request(x, r, scratch, &diag);
      ++rows;
      // top_p masses are summed in another order (bins vs sorted walk): a cut within 1e-5 of
      // a cumulative sum may differ, as on the GPU.
      if (got == want) ++exact;
      else if (diag.top_p_margin < 1e-5) ++boundary;
      else ADD_FAILURE() << "V=" << V << " kind " << kind << " T=" << r.temperature << " top_k=" << r.top_k
                         << " top_p=" << r.top_p << " min_p=" << r.min_p << ": mirror " << got << ", CPU " << want;
    }
  }
  EXPECT_EQ(exact + boundary, rows);
  EXPECT_LE(boundary * 100, rows);
}
