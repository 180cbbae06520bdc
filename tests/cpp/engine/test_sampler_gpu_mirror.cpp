// A sequential mirror of the GPU sampling kernels' algorithms (src/backends/cuda/sampling/sampling.cu and sampling_cut.cu),
// checked against the CPU sampler on bf16-rounded logits full of ties. Two paths: the
// candidate path for rows with a small top_k (per-slice supersets of the top_k by an early-
// stopping radix select, their union filtered by min_p, the exact top_k of it, then sort, top_p
// walk and race: sampling_block.cuh / sample_split.h), and the cut and race paths for the rest
// (radix select for top_k, radix select for top_p on fixed-point masses, lowest-id tie splits, the
// race; the GPU runs each digit over all slices at once, whose integer sums are the ones here).
// CI has no GPU: this proves the selection logic here; tests/cuda/test_sampling.cpp runs the
// kernels themselves against the same sampler on the H200. Keep the two in step.
#include <gtest/gtest.h>

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>

#include "backends/sample_math.h"
#include "backends/sample_split.h"
#include "core/bf16.h"
#include "engine/sampler.h"
#include "engine/sampling_cases.h"

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

// --- candidate path (sampling_block.cuh: select_top / gather_kept; sampling.cu) ---
struct TopRule { uint32_t lo, tie; int r; };
// select_top: keys (0 = absent) -> the rule keeping a superset (<= max(k, cap)) of the best k.
TopRule select_top(const std::vector<uint32_t>& keys, int k, int cap) {
  uint32_t prefix = 0, pmask = 0; int need = k, above = 0;
  for (int pass = 0; pass < 4; ++pass) {
    const int shift = 24 - 8 * pass; unsigned cnt[256] = {0};
    for (uint32_t key : keys) if (key != 0 && (key & pmask) == prefix) cnt[(key >> shift) & 255]++;
    int acc = 0, sel = -1, sel_count = 0, nth = 0;
    for (int b = 255; b >= 0 && sel < 0; --b) { int c = int(cnt[b]); if (acc + c >= need) sel = b, sel_count = c, nth = need - acc; else acc += c; }
    if (sel < 0) return {0, 0, 0};
    prefix |= uint32_t(sel) << shift; pmask |= 0xFFu << shift; above += need - nth; need = nth;
    if (above + sel_count <= cap) return {prefix, 0, 0};
  }
  return {prefix, prefix, need};
}
std::vector<int> gather_kept(const std::vector<uint32_t>& keys, const TopRule& rule) {
  std::vector<int> out; int tie_seen = 0;
  for (int i = 0; i < int(keys.size()); ++i) { uint32_t key = keys[i]; if (key == 0 || key < rule.lo) continue;
    if (key == rule.tie) { if (tie_seen++ < rule.r) out.push_back(i); } else out.push_back(i); }
  return out;
}
int mirror_candidates(const float* x, int V, const SampleRowParams& p, const sample_split::SplitPlan& plan,
                      int* max_candidates_seen) {
  // Kernel 1: per slice its argmax and a superset of its top_k, at most plan.cap.
  std::vector<uint32_t> slot_key(size_t(plan.splits) * size_t(plan.cap), 0u);
  std::vector<int> slot_id(slot_key.size(), INT_MAX);
  float m = -INFINITY; int am = INT_MAX;
  for (int s = 0; s < plan.splits; ++s) {
    const int begin = std::min(V, s * plan.slice), n = std::min(V - begin, plan.slice);
    std::vector<uint32_t> keys(static_cast<size_t>(n));
    float sm_ = -INFINITY; int sam = INT_MAX;
    for (int i = 0; i < n; ++i) { float v = x[begin + i]; if (v == v && (v > sm_ || (v == sm_ && begin + i < sam))) sm_ = v, sam = begin + i;
      keys[size_t(i)] = v >= -FLT_MAX ? sm::order_key(v) : 0u; }
    if (sm_ > m || (sm_ == m && sam < am)) m = sm_, am = sam;
    // The lower bound from the threads' maxima (thread t reads t, t + kSliceThreads, ...).
    std::vector<uint32_t> thread_max(sample_split::kSliceThreads, 0u);
    for (int i = 0; i < n; ++i) { uint32_t& t = thread_max[size_t(i % sample_split::kSliceThreads)]; t = std::max(t, keys[size_t(i)]); }
    const uint32_t bound = select_top(thread_max, p.top_k, p.top_k).lo;
    for (auto& k : keys) if (k < bound) k = 0;
    const std::vector<int> kept = gather_kept(keys, select_top(keys, p.top_k, plan.cap));
    if (int(kept.size()) > plan.cap) ADD_FAILURE() << "slice " << s << " keeps " << kept.size() << " > cap " << plan.cap;
    *max_candidates_seen = std::max(*max_candidates_seen, int(kept.size()));
    for (size_t j = 0; j < kept.size() && int(j) < plan.cap; ++j) {
      slot_key[size_t(s) * size_t(plan.cap) + j] = keys[size_t(kept[j])];
      slot_id[size_t(s) * size_t(plan.cap) + j] = begin + kept[j];
    }
  }
  // Finish: floor, exact top_k of the union, sort, top_p walk, race.
  if (!std::isfinite(m)) return am == INT_MAX ? 0 : am;
  const float floor = p.has_min_p ? sm::min_p_floor(m, p.temperature, p.log_min_p) : -FLT_MAX;
  const uint32_t floor_key = sm::order_key(floor);
  for (auto& k : slot_key) if (k < floor_key) k = 0;
  std::vector<int> kept_id;
  for (int s : gather_kept(slot_key, select_top(slot_key, p.top_k, p.top_k))) kept_id.push_back(slot_id[size_t(s)]);
  if (int(kept_id.size()) > p.top_k) ADD_FAILURE() << "finish keeps " << kept_id.size() << " > top_k " << p.top_k;
  const int nk = int(kept_id.size());
  std::vector<int> sorted_id(static_cast<size_t>(nk)); std::vector<float> sorted_v(static_cast<size_t>(nk));
  for (int t = 0; t < nk; ++t) { int id = kept_id[size_t(t)]; float v = x[id]; int rank = 0;
    for (int u = 0; u < nk; ++u) { float vu = x[kept_id[size_t(u)]]; int iu = kept_id[size_t(u)]; rank += (vu > v || (vu == v && iu < id)); }
    sorted_id[size_t(rank)] = id; sorted_v[size_t(rank)] = v; }
  int keep = nk;
  if (p.top_p < 1.0f) {
    std::vector<double> w(static_cast<size_t>(nk)); double total = 0;
    for (int j = 0; j < nk; ++j) w[size_t(j)] = std::exp(double(sm::tempered(sorted_v[size_t(j)], m, p.inv_t)));
    for (int j = 0; j < nk; ++j) total += w[size_t(j)];
    const double target = double(p.top_p) * total; double cum = 0; keep = 0;
    while (keep < nk && cum < target) cum += w[size_t(keep++)];
    keep = std::max(keep, 1);
  }
  keep = std::min(keep, nk);
  float best = -INFINITY; int best_id = INT_MAX;
  for (int t = 0; t < keep; ++t) { float sc = sm::race_score(sorted_v[size_t(t)], m, p.inv_t, p.key, sorted_id[size_t(t)]);
    if (sc > best || (sc == best && sorted_id[size_t(t)] < best_id)) best = sc, best_id = sorted_id[size_t(t)]; }
  return best_id == INT_MAX ? am : best_id;
}

// The cut path (and the race path: no cuts).
int mirror_cuts(const float* x, int V, const SampleRowParams& p) {
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
    uint32_t prefix = 0, pmask = 0; uint64_t above = 0; double target = 0; int tie_count = 0;
    for (int pass = 0; pass < 4; ++pass) {
      int shift = 24 - 8 * pass; unsigned cnt[256] = {0}; uint64_t mass[256] = {0};
      for (int i = 0; i < V; ++i) { float v = x[i]; uint32_t key = sm::order_key(v);
        if (v >= floor && passes(ck, key, i) && (key & pmask) == prefix) { int b = (key >> shift) & 255; cnt[b]++; mass[b] += sm::mass_fixed(v, m, inv_t); } }
      if (pass == 0) { uint64_t total = 0; for (int b = 255; b >= 0; --b) total += mass[b]; target = double(p.top_p) * double(total); }
      uint64_t acc = above; int sel = -1;
      for (int b = 255; b >= 0 && sel < 0; --b) { if (cnt[b] == 0) continue;
        if (double(acc + mass[b]) >= target) { sel = b; above = acc; } else acc += mass[b]; }
      if (sel < 0) ADD_FAILURE() << "exact sums must reach the target";
      tie_count = sel >= 0 ? cnt[sel] : 0;
      prefix |= uint32_t(sel) << shift; pmask |= 0xFFu << shift;
    }
    const uint64_t w = sm::mass_fixed(sm::key_float(prefix), m, inv_t);
    double q = w == 0 ? double(tie_count) : (target - double(above)) / double(w);
    int keep = q >= double(tie_count) ? tie_count : std::max(1, int(std::ceil(q)));
    cp = Cut{true, prefix, tie_count > keep ? nth_tied(x, V, floor, ck, prefix, keep) : INT_MAX};
  }
  float best = -INFINITY; int best_id = INT_MAX;
  for (int i = 0; i < V; ++i) { float v = x[i]; if (!(v >= floor)) continue; uint32_t key = sm::order_key(v);
    if (!passes(ck, key, i) || !passes(cp, key, i)) continue; float s = sm::race_score(v, m, inv_t, p.key, i);
    if (s > best || (s == best && i < best_id)) best = s, best_id = i; }
  return best_id == INT_MAX ? am : best_id;
}

// Which path the kernels take for this row, as sample_rows decides.
int mirror_sample(const float* x, int V, const SampleRowParams& p, int* max_candidates_seen, bool* candidate_path) {
  const sample_split::SplitPlan plan = sample_split::split_plan(V);
  *candidate_path = sample_split::uses_candidates(plan, p.greedy, p.top_k);
  return *candidate_path ? mirror_candidates(x, V, p, plan, max_candidates_seen) : mirror_cuts(x, V, p);
}

using namespace striker::sampling_cases;  // make_row, random_request, ... (engine/sampling_cases.h)

struct MirrorTally {
  int rows = 0, exact = 0, boundary = 0, candidate_rows = 0, max_candidates = 0;
};

void check_row(const std::vector<float>& x, const SampleRequest& r, int kind, MirrorTally& t) {
  const int64_t V = int64_t(x.size());
  std::vector<float> scratch, processed;
  process_logits(x, r, processed);
  bool candidate_path = false;
  const int got = mirror_sample(processed.data(), int(V), row_params(r, V), &t.max_candidates, &candidate_path);
  SampleDiagnostics diag;
  const int want = sample_request(x, r, scratch, &diag);
  ++t.rows;
  t.candidate_rows += candidate_path;
  // top_p masses are summed in another order (bins vs sorted walk, or exp's last ulp): a cut
  // within 1e-5 of a cumulative sum may differ, as on the GPU.
  if (got == want) ++t.exact;
  else if (diag.top_p_margin < 1e-5) ++t.boundary;
  else ADD_FAILURE() << "V=" << V << " kind " << kind << (candidate_path ? " (candidate path)" : " (cut or race path)")
                     << " T=" << r.temperature << " top_k=" << r.top_k << " top_p=" << r.top_p << " min_p=" << r.min_p
                     << ": mirror " << got << ", CPU " << want;
}

}  // namespace

TEST(SamplerGpuMirror, SplitPlanCoversTheVocabularyWithinItsLimits) {
  for (int64_t V : {1L, 2L, 37L, 2048L, 2049L, 4099L, 20011L, 151552L, 262144L, 262145L, 524288L, 600000L}) {
    const sample_split::SplitPlan p = sample_split::split_plan(V);
    if (p.splits == 0) {
      EXPECT_GT(V, int64_t(sample_split::kMaxSplits) * sample_split::kMaxSlice) << "V=" << V;
      continue;
    }
    EXPECT_GE(int64_t(p.splits) * p.slice, V) << "V=" << V;
    EXPECT_LE(p.slice, sample_split::kMaxSlice) << "V=" << V;
    EXPECT_LE(p.splits, sample_split::kMaxSplits) << "V=" << V;
    EXPECT_LE(p.splits * p.cap, sample_split::kMaxCandidates) << "V=" << V;
    EXPECT_LE(p.cap, sample_split::kMaxCap) << "V=" << V;
    EXPECT_GE(p.cap, 20) << "V=" << V << ": the server's default top_k must take the candidate path";
  }
  const sample_split::SplitPlan flint = sample_split::split_plan(151552);
  EXPECT_EQ(flint.splits, 32);
  EXPECT_EQ(flint.cap, 128);
}

TEST(SamplerGpuMirror, KernelAlgorithmDrawsTheCpuSamplersTokens) {
  std::mt19937 rng(5);
  MirrorTally t;
  for (int64_t V : {37L, 4099L, 20011L}) {
    for (int it = 0; it < (V > 5000 ? 300 : 1500); ++it) {
      const int kind = int(rng() % 6);
      check_row(make_row(rng, V, kind), random_request(rng, V, 0), kind, t);
    }
  }
  std::printf("mirror: %d rows (%d on the candidate path, at most %d candidates in a slice), %d exact, %d top_p-boundary\n",
              t.rows, t.candidate_rows, t.max_candidates, t.exact, t.boundary);
  EXPECT_EQ(t.exact + t.boundary, t.rows);
  EXPECT_LE(t.boundary * 100, t.rows);
  EXPECT_GT(t.candidate_rows * 4, t.rows) << "too few rows exercised the candidate path";
}

// Flint's generation_config (T 1, top_k 20, top_p 0.95) at Flint's vocabulary: the split the
// H200 runs (32 slices of 4736), every kind of row, with and without min_p and penalties.
TEST(SamplerGpuMirror, GenerationConfigAtFlintVocabulary) {
  std::mt19937 rng(11);
  MirrorTally t;
  const int64_t V = 151552;
  for (int it = 0; it < 36; ++it) {
    const int kind = it % 6;
    SampleRequest r = random_request(rng, V, 0);
    r.temperature = 1.f;
    r.top_k = 20;
    r.top_p = 0.95f;
    if (it % 3 == 0) r.min_p = 0.f;
    check_row(make_row(rng, V, kind), r, kind, t);
  }
  EXPECT_EQ(t.candidate_rows, t.rows);
  EXPECT_EQ(t.exact + t.boundary, t.rows);
  EXPECT_LE(t.boundary, 1);
}
