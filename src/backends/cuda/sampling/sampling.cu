#include "backends/cuda/sampling/sampling.h"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <limits>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/sampling/sampling_block.cuh"
#include "backends/sample_math.h"
#include "backends/sample_split.h"

namespace striker::cuda {
namespace {

namespace sm = sample_math;
using namespace sampling_detail;
constexpr int kThreads = 1024;  // one CTA per sampled row (the one-CTA path and the finish)
constexpr int kSliceThreads = sample_split::kSliceThreads;  // one CTA per slice of a candidate-path row

// A cut of the ranking (higher value first, then lower id): a token passes when its key is
// above `key`, or equal with an id at most `id_limit`.
struct Cut {
  bool on;
  uint32_t key;
  int32_t id_limit;
};
__device__ __forceinline__ bool passes(const Cut& c, uint32_t key, int32_t i) {
  return !c.on || key > c.key || (key == c.key && i <= c.id_limit);
}

// The id of the n-th (1-based) lowest-id token with key `key` that passes `floor` and `cut`.
// Each thread owns a contiguous id range; a block scan of the per-range counts finds the
// range holding the n-th one.
__device__ int32_t nth_tied_id(const float* x, int32_t V, float floor, const Cut& cut, uint32_t key, int32_t n,
                               Shared& sh) {
  const int32_t chunk = (V + kThreads - 1) / kThreads;
  const int32_t begin = min(V, int32_t(threadIdx.x) * chunk), end = min(V, begin + chunk);
  auto match = [&](int32_t i) {
    const float v = x[i];
    return v >= floor && sm::order_key(v) == key && passes(cut, key, i);
  };
  int32_t c = 0;
  for (int32_t i = begin; i < end; ++i) c += match(i);
  if (threadIdx.x == 0) sh.nth = INT_MAX;
  const int32_t before = block_exclusive_scan<kThreads>(c, sh);  // its barriers also publish sh.nth
  if (before < n && before + c >= n) {
    int32_t need = n - before;
    for (int32_t i = begin; i < end; ++i)
      if (match(i) && --need == 0) {
        sh.nth = i;
        break;
      }
  }
  __syncthreads();
  const int32_t id = sh.nth;
  __syncthreads();
  return id;
}

__global__ void __launch_bounds__(256) edit_kernel(float* logits, int64_t vocab, const SampleRowParams* params,
                                                   const LogitEdit* edits, const int32_t* counts, int64_t max_edits) {
  pdl_grid_start();  // see launch.cuh
  const int64_t n = min(int64_t(counts[1]), max_edits);
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const LogitEdit ed = edits[e];
    const SampleRowParams& p = params[ed.sample];
    float* x = logits + int64_t(p.row) * vocab + ed.id;
    *x = sm::process_logit(*x, ed.suppressed != 0, ed.bias, ed.repeated != 0, p.repetition_penalty, ed.output_count,
                           p.frequency_penalty, p.presence_penalty);
  }
}

// Candidate path, first kernel: grid (samples, splits). The CTA of (sample, slice) keeps a
// superset of its slice's top_k (at most plan.cap tokens, by sample_split's rule) and the
// slice's greedy argmax (NaN skipped, lowest id on ties) in the scratch. -inf and NaN are
// never candidates: the CPU's top_k keeps only tokens >= -FLT_MAX.
__global__ void __launch_bounds__(kSliceThreads) candidates_kernel(const float* logits, int32_t V,
                                                                   const SampleRowParams* params,
                                                                   const int32_t* counts, sample_split::SplitPlan plan,
                                                                   SampleScratch scratch) {
  pdl_grid_start();
  const int sample = int(blockIdx.x), slice = int(blockIdx.y);
  if (sample >= counts[0]) return;
  const SampleRowParams p = params[sample];
  const bool race = sample_split::uses_race(plan, p.greedy != 0, p.top_k, p.top_p);
  if (!race && !sample_split::uses_candidates(plan, p.greedy != 0, p.top_k)) return;  // block-uniform
  __shared__ uint32_t keys[sample_split::kMaxSlice];
  __shared__ uint32_t thread_max[kSliceThreads];
  __shared__ Shared sh;
  const float* x = logits + int64_t(p.row) * V;
  const int32_t begin = min(V, slice * plan.slice);
  const int n = min(V - begin, plan.slice);
  if (race) {  // the race path needs only the slice's maximum here (race_kernel does the rest)
    float m = -std::numeric_limits<float>::infinity();
    int32_t am = INT_MAX;
    for (int i = threadIdx.x; i < n; i += kSliceThreads) {
      const float v = x[begin + i];
      if (v == v && better(v, begin + i, m, am)) m = v, am = begin + i;
    }
    block_argmax<kSliceThreads>(m, am, sh);
    const int64_t slot = int64_t(sample) * sample_split::kMaxSplits + slice;
    if (threadIdx.x == 0) scratch.slice_max_v[slot] = m, scratch.slice_max_id[slot] = am;
    return;
  }
  float m = -std::numeric_limits<float>::infinity();
  int32_t am = INT_MAX;
  uint32_t tmax = 0;
  for (int i = threadIdx.x; i < n; i += kSliceThreads) {
    const float v = x[begin + i];
    if (v == v && better(v, begin + i, m, am)) m = v, am = begin + i;
    const uint32_t key = v >= -FLT_MAX ? sm::order_key(v) : 0u;  // 0: not a candidate
    keys[i] = key;
    tmax = max(tmax, key);
  }
  thread_max[threadIdx.x] = tmax;
  __syncthreads();
  block_argmax<kSliceThreads>(m, am, sh);
  const int64_t slot = int64_t(sample) * sample_split::kMaxSplits + slice;
  if (threadIdx.x == 0) scratch.slice_max_v[slot] = m, scratch.slice_max_id[slot] = am;
  // A cheap lower bound of the slice's k-th key: the k-th best of the threads' maxima (k
  // distinct tokens reach it). Keys below it cannot be in the top_k; dropping them first
  // leaves the radix select below a few hundred keys instead of the whole slice.
  const uint32_t bound = select_top<kSliceThreads>(thread_max, kSliceThreads, p.top_k, p.top_k, sh).lo;
  if (bound > 0)
    for (int i = threadIdx.x; i < n; i += kSliceThreads)
      if (keys[i] < bound) keys[i] = 0;
  __syncthreads();
  const TopRule rule = select_top<kSliceThreads>(keys, n, p.top_k, plan.cap, sh);
  const int64_t out_base = int64_t(sample) * sample_split::kMaxCandidates + int64_t(slice) * plan.cap;
  const int32_t kept = gather_kept<kSliceThreads>(keys, n, rule, sh, [&](int i, int32_t pos) {
    scratch.cand_key[out_base + pos] = keys[i];
    scratch.cand_id[out_base + pos] = begin + i;
  });
  if (threadIdx.x == 0) scratch.cand_n[slot] = kept;
}

// The row maximum and its id (NaN never counts; lowest id on ties) from the slices' maxima: the
// one-CTA path's m and am, whatever the split (max and the tie rule do not depend on the order).
template <int kBlock>
__device__ void row_max_from_slices(int sample, const sample_split::SplitPlan& plan, const SampleScratch& scratch,
                                    float& m, int32_t& am, Shared& sh) {
  const int64_t slot0 = int64_t(sample) * sample_split::kMaxSplits;
  m = -std::numeric_limits<float>::infinity();
  am = INT_MAX;
  for (int j = threadIdx.x; j < plan.splits; j += kBlock) {
    const float v = scratch.slice_max_v[slot0 + j];
    const int32_t id = scratch.slice_max_id[slot0 + j];
    if (better(v, id, m, am)) m = v, am = id;
  }
  block_argmax<kBlock>(m, am, sh);
}

// Shared memory of the candidate finish (kept apart from Shared: the one-CTA path needs none).
struct FinishShared {
  uint32_t key[sample_split::kMaxCandidates];  // 0: empty slot or below the min_p floor
  int32_t id[sample_split::kMaxCandidates];
  int32_t kept_id[sample_split::kMaxCap];  // the row's top_k, in id order
  float kept_v[sample_split::kMaxCap];
  int32_t sorted_id[sample_split::kMaxCap];  // the same, best first (value desc, id asc)
  float sorted_v[sample_split::kMaxCap];
  double w[sample_split::kMaxCap];
  int32_t keep;
};

// Candidate path, finish (one CTA per row, in sample_kernel): the row max from the slices'
// maxima, the min_p floor, the exact top_k of the union of the slices' candidates, then the
// CPU sampler's own steps on at most top_k tokens: sort, top_p walk in double in rank order,
// and the race.
__device__ void finish_from_candidates(const float* x, const SampleRowParams& p, int sample,
                                       const sample_split::SplitPlan& plan, const SampleScratch& scratch,
                                       int32_t* out, Shared& sh, FinishShared& fs) {
  const int tid = threadIdx.x;
  const int64_t slot0 = int64_t(sample) * sample_split::kMaxSplits;
  float m;
  int32_t am;
  row_max_from_slices<kThreads>(sample, plan, scratch, m, am, sh);
  if (!isfinite(m)) {  // block-uniform; the CPU's argmax fallback
    if (tid == 0) out[sample] = am == INT_MAX ? 0 : am;
    return;
  }
  const float floor = p.has_min_p ? sm::min_p_floor(m, p.temperature, p.log_min_p) : -FLT_MAX;
  const uint32_t floor_key = sm::order_key(floor);  // v >= floor <=> order_key(v) >= floor_key
  const float inv_t = p.inv_t;
  const int n = plan.splits * plan.cap;
  const int64_t cand0 = int64_t(sample) * sample_split::kMaxCandidates;
  for (int s = tid; s < n; s += kThreads) {
    const int slice = s / plan.cap, j = s - slice * plan.cap;
    uint32_t key = 0;
    int32_t id = INT_MAX;
    if (j < scratch.cand_n[slot0 + slice]) {
      key = scratch.cand_key[cand0 + s];
      id = scratch.cand_id[cand0 + s];
      if (key < floor_key) key = 0;
    }
    fs.key[s] = key;
    fs.id[s] = id;
  }
  __syncthreads();
  // Slots run slice by slice, each slice in id order: array order is id order, as the tie
  // split of top_k needs.
  const TopRule rule = select_top<kThreads>(fs.key, n, p.top_k, p.top_k, sh);
  const int32_t nk = gather_kept<kThreads>(fs.key, n, rule, sh, [&](int s, int32_t pos) { fs.kept_id[pos] = fs.id[s]; });
  __syncthreads();
  if (tid < nk) fs.kept_v[tid] = x[fs.kept_id[tid]];
  __syncthreads();
  if (tid < nk) {  // rank by counting: nk <= kMaxCap
    const float v = fs.kept_v[tid];
    const int32_t id = fs.kept_id[tid];
    int rank = 0;
    for (int u = 0; u < nk; ++u) rank += better(fs.kept_v[u], fs.kept_id[u], v, id);
    fs.sorted_id[rank] = id;
    fs.sorted_v[rank] = v;
  }
  __syncthreads();
  if (p.top_p < 1.0f) {
    if (tid < nk) fs.w[tid] = exp(double(sm::tempered(fs.sorted_v[tid], m, inv_t)));
    __syncthreads();
    if (tid == 0) {  // the CPU's walk, in its order: at most kMaxCap dependent adds
      double total = 0;
      for (int j = 0; j < nk; ++j) total += fs.w[j];
      const double target = double(p.top_p) * total;
      double cum = 0;
      int keep = 0;
      while (keep < nk && cum < target) cum += fs.w[keep++];
      fs.keep = max(keep, 1);
    }
  } else if (tid == 0) {
    fs.keep = nk;
  }
  __syncthreads();
  const int keep = min(fs.keep, nk);
  float best = -std::numeric_limits<float>::infinity();
  int32_t best_id = INT_MAX;
  if (tid < keep) {
    best_id = fs.sorted_id[tid];
    best = sm::race_score(fs.sorted_v[tid], m, inv_t, p.key, best_id);
  }
  block_argmax<kThreads>(best, best_id, sh);
  if (tid == 0) out[sample] = best_id == INT_MAX ? am : best_id;
}

// Race path, second kernel: grid (samples, splits). Each slice's winner of the exponential race
// (sample_math::race_score against the row maximum, min_p floor; ties to the lower id) — the
// one-CTA path's step 4 on the slice's tokens.
__global__ void __launch_bounds__(kSliceThreads) race_kernel(const float* logits, int32_t V,
                                                             const SampleRowParams* params, const int32_t* counts,
                                                             sample_split::SplitPlan plan, SampleScratch scratch) {
  pdl_grid_start();
  const int sample = int(blockIdx.x), slice = int(blockIdx.y);
  if (sample >= counts[0]) return;
  const SampleRowParams p = params[sample];
  if (p.greedy != 0 || !sample_split::uses_race(plan, false, p.top_k, p.top_p)) return;  // block-uniform
  __shared__ Shared sh;
  float m;
  int32_t am;
  row_max_from_slices<kSliceThreads>(sample, plan, scratch, m, am, sh);
  if (!isfinite(m)) return;  // block-uniform: the finish falls back to the argmax
  const float* x = logits + int64_t(p.row) * V;
  const float floor = p.has_min_p ? sm::min_p_floor(m, p.temperature, p.log_min_p) : -FLT_MAX;
  const int32_t begin = min(V, slice * plan.slice), end = min(V, begin + plan.slice);
  float best = -std::numeric_limits<float>::infinity();
  int32_t best_id = INT_MAX;
  for (int32_t i = begin + int32_t(threadIdx.x); i < end; i += kSliceThreads) {
    const float v = x[i];
    if (!(v >= floor)) continue;
    const float sc = sm::race_score(v, m, p.inv_t, p.key, i);
    if (better(sc, i, best, best_id)) best = sc, best_id = i;
  }
  block_argmax<kSliceThreads>(best, best_id, sh);
  const int64_t slot = int64_t(sample) * sample_split::kMaxSplits + slice;
  if (threadIdx.x == 0) scratch.slice_race_v[slot] = best, scratch.slice_race_id[slot] = best_id;
}

// Race path, finish (one CTA per row, in sample_kernel): the best of the slices' winners.
__device__ void finish_from_race(const SampleRowParams& p, int sample, const sample_split::SplitPlan& plan,
                                 const SampleScratch& scratch, int32_t* out, Shared& sh) {
  float m;
  int32_t am;
  row_max_from_slices<kThreads>(sample, plan, scratch, m, am, sh);
  if (p.greedy || !isfinite(m)) {  // block-uniform
    if (threadIdx.x == 0) out[sample] = am == INT_MAX ? 0 : am;
    return;
  }
  const int64_t slot0 = int64_t(sample) * sample_split::kMaxSplits;
  float best = -std::numeric_limits<float>::infinity();
  int32_t best_id = INT_MAX;
  for (int j = threadIdx.x; j < plan.splits; j += kThreads) {
    const float v = scratch.slice_race_v[slot0 + j];
    const int32_t id = scratch.slice_race_id[slot0 + j];
    if (better(v, id, best, best_id)) best = v, best_id = id;
  }
  block_argmax<kThreads>(best, best_id, sh);
  if (threadIdx.x == 0) out[sample] = best_id == INT_MAX ? am : best_id;
}

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* logits, int32_t V,
                                                          const SampleRowParams* params, const int32_t* counts,
                                                          sample_split::SplitPlan plan, SampleScratch scratch,
                                                          int32_t* out) {
  pdl_grid_start();
  if (int(blockIdx.x) >= counts[0]) return;
  __shared__ Shared sh;
  const SampleRowParams p = params[blockIdx.x];
  const float* x = logits + int64_t(p.row) * V;
  const int tid = threadIdx.x;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (sample_split::uses_candidates(plan, p.greedy != 0, p.top_k)) {
    __shared__ FinishShared fs;
    finish_from_candidates(x, p, int(blockIdx.x), plan, scratch, out, sh, fs);
    return;
  }
  if (sample_split::uses_race(plan, p.greedy != 0, p.top_k, p.top_p)) {
    finish_from_race(p, int(blockIdx.x), plan, scratch, out, sh);
    return;
  }

  // 1. max and greedy argmax (NaN never counts; lowest id on ties).
  float m = kNegInf;
  int32_t am = INT_MAX;
  for (int32_t i = tid; i < V; i += kThreads) {
    const float v = x[i];
    if (v == v && better(v, i, m, am)) m = v, am = i;
  }
  block_argmax<kThreads>(m, am, sh);
  if (p.greedy || !isfinite(m)) {  // block-uniform
    if (tid == 0) out[blockIdx.x] = am == INT_MAX ? 0 : am;
    return;
  }
  const float floor = p.has_min_p ? sm::min_p_floor(m, p.temperature, p.log_min_p) : -FLT_MAX;
  const float inv_t = p.inv_t;

  // 2. top_k: radix select of the k-th best key among tokens >= floor.
  Cut ck{false, 0u, INT_MAX};
  if (p.top_k > 0) {
    uint32_t prefix = 0, pmask = 0;
    int32_t remaining = p.top_k, tie_count = 0;
    bool cut = true;
    for (int pass = 0; pass < 4; ++pass) {
      const int shift = 24 - 8 * pass;
      clear_hist<kThreads>(sh, false);
      for (int32_t base = 0; base < V; base += kThreads) {
        const int32_t i = base + tid;
        int bin = -1;
        if (i < V) {
          const float v = x[i];
          const uint32_t key = sm::order_key(v);
          if (v >= floor && (key & pmask) == prefix) bin = int((key >> shift) & 0xFFu);
        }
        hist_add<false>(sh, bin, 0.0);
      }
      __syncthreads();
      if (tid == 0) {  // highest bins first: the bin where the count reaches `remaining`
        int32_t acc = 0, total = 0;
        sh.sel_bin = -1;
        for (int b = kBins - 1; b >= 0; --b) {
          const int32_t c = int32_t(sh.cnt[b]);
          if (sh.sel_bin < 0 && acc + c >= remaining) sh.sel_bin = b, sh.sel_count = c, sh.nth = remaining - acc;
          if (sh.sel_bin < 0) acc += c;
          total += c;
        }
        sh.total = total;
      }
      __syncthreads();
      if (sh.sel_bin < 0) {  // fewer than k tokens pass the floor (only possible in pass 0)
        cut = false;
        break;
      }
      prefix |= uint32_t(sh.sel_bin) << shift;
      pmask |= 0xFFu << shift;
      remaining = sh.nth;
      tie_count = sh.sel_count;
      __syncthreads();  // sh.sel_* and sh.nth are rewritten below
    }
    if (cut) {
      // remaining = how many of the tokens with key == prefix stay (the lowest ids).
      const Cut none{false, 0u, INT_MAX};
      ck = Cut{true, prefix, tie_count > remaining ? nth_tied_id(x, V, floor, none, prefix, remaining, sh) : INT_MAX};
    }
  }

  // 3. top_p: radix select on probability mass over the tokens kept so far. Keep a token
  // while the mass ranked above it is below top_p of their total (the CPU's walk).
  Cut cp{false, 0u, INT_MAX};
  if (p.top_p < 1.0f) {
    uint32_t prefix = 0, pmask = 0;
    double above = 0.0, target = 0.0;
    int32_t tie_count = 0;
    for (int pass = 0; pass < 4; ++pass) {
      const int shift = 24 - 8 * pass;
      clear_hist<kThreads>(sh, true);
      for (int32_t base = 0; base < V; base += kThreads) {
        const int32_t i = base + tid;
        int bin = -1;
        double w = 0.0;
        if (i < V) {
          const float v = x[i];
          const uint32_t key = sm::order_key(v);
          if (v >= floor && passes(ck, key, i) && (key & pmask) == prefix) {
            bin = int((key >> shift) & 0xFFu);
            w = exp(double(sm::tempered(v, m, inv_t)));
          }
        }
        hist_add<true>(sh, bin, w);
      }
      __syncthreads();
      if (tid == 0) {
        if (pass == 0) {  // total in the walk's own order, so the walk surely reaches target
          double total = 0.0;
          for (int b = kBins - 1; b >= 0; --b) total += sh.mass[b];
          sh.target = double(p.top_p) * total;
        }
        double acc = 0.0;
        int last_nonempty = -1;
        double acc_before_last = 0.0;
        sh.sel_bin = -1;
        for (int b = kBins - 1; b >= 0 && sh.sel_bin < 0; --b) {
          if (sh.cnt[b] == 0) continue;
          if (above + acc + sh.mass[b] >= sh.target) {
            sh.sel_bin = b;
            sh.sel_above = above + acc;
          } else {
            last_nonempty = b;
            acc_before_last = acc;
            acc += sh.mass[b];
          }
        }
        // Sub-bins can sum a few ulps below their parent bin: the crossing is then at the
        // end of this bucket, i.e. its lowest non-empty bin.
        if (sh.sel_bin < 0) sh.sel_bin = last_nonempty, sh.sel_above = above + acc_before_last;
        sh.sel_count = sh.sel_bin >= 0 ? int32_t(sh.cnt[sh.sel_bin]) : 0;
      }
      __syncthreads();
      target = sh.target;
      prefix |= uint32_t(sh.sel_bin) << shift;
      pmask |= 0xFFu << shift;
      above = sh.sel_above;
      tie_count = sh.sel_count;
      __syncthreads();
    }
    // The tokens with key == prefix all weigh w; the r-th of them (by id) has above + r*w
    // ranked before it and stays while that is below target.
    const double w = exp(double(sm::tempered(sm::key_float(prefix), m, inv_t)));
    const double q = (target - above) / w;
    const int32_t keep = q >= double(tie_count) ? tie_count : max(1, int32_t(ceil(q)));
    cp = Cut{true, prefix, tie_count > keep ? nth_tied_id(x, V, floor, ck, prefix, keep, sh) : INT_MAX};
  }

  // 4. The exponential race over the kept tokens (sample_math::race_score), ties to lower id.
  float best = kNegInf;
  int32_t best_id = INT_MAX;
  for (int32_t i = tid; i < V; i += kThreads) {
    const float v = x[i];
    if (!(v >= floor)) continue;
    const uint32_t key = sm::order_key(v);
    if (!passes(ck, key, i) || !passes(cp, key, i)) continue;
    const float s = sm::race_score(v, m, inv_t, p.key, i);
    if (better(s, i, best, best_id)) best = s, best_id = i;
  }
  block_argmax<kThreads>(best, best_id, sh);
  if (tid == 0) out[blockIdx.x] = best_id == INT_MAX ? am : best_id;
}

// The split in use: none when the caller gave no scratch (every row then takes the one-CTA path).
sample_split::SplitPlan split_plan(int64_t vocab, const SampleScratch& scratch) {
  if (!scratch.cand_key) return {};
  return sample_split::split_plan(vocab);
}

}  // namespace

void apply_logit_edits(float* logits, int64_t vocab, const SampleRowParams* params, const LogitEdit* edits,
                       const int32_t* counts, int64_t max_edits, cudaStream_t stream) {
  if (max_edits <= 0) return;
  const int64_t blocks = std::min<int64_t>((max_edits + 255) / 256, 1024);
  edit_kernel<<<dim3(unsigned(blocks)), dim3(256), 0, stream>>>(logits, vocab, params, edits, counts, max_edits);
  STRIKER_CUDA_CHECK_LAUNCH("apply_logit_edits");
}

void sample_rows(const float* logits, int64_t vocab, const SampleRowParams* params, const int32_t* counts,
                 int max_samples, const SampleScratch& scratch, int32_t* out_tokens, cudaStream_t stream,
                 bool any_race) {
  if (max_samples <= 0) return;
  if (vocab <= 0 || vocab > INT_MAX) throw Error("sample_rows: vocabulary size " + std::to_string(vocab) + " out of range");
  const sample_split::SplitPlan plan = split_plan(vocab, scratch);
  if (plan.splits > 0) {
    candidates_kernel<<<dim3(unsigned(max_samples), unsigned(plan.splits)), dim3(kSliceThreads), 0, stream>>>(
        logits, int32_t(vocab), params, counts, plan, scratch);
    STRIKER_CUDA_CHECK_LAUNCH("sample_rows (candidates)");
    if (any_race) {
      race_kernel<<<dim3(unsigned(max_samples), unsigned(plan.splits)), dim3(kSliceThreads), 0, stream>>>(
          logits, int32_t(vocab), params, counts, plan, scratch);
      STRIKER_CUDA_CHECK_LAUNCH("sample_rows (race)");
    }
  }
  sample_kernel<<<dim3(unsigned(max_samples)), dim3(kThreads), 0, stream>>>(logits, int32_t(vocab), params, counts,
                                                                            plan, scratch, out_tokens);
  STRIKER_CUDA_CHECK_LAUNCH("sample_rows");
}

}  // namespace striker::cuda
