#include "backends/cuda/sampling/sampling.h"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <limits>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/sampling/sampling_block.cuh"
#include "backends/cuda/sampling/sampling_cut.h"
#include "backends/sample_math.h"
#include "backends/sample_split.h"

namespace striker::cuda {
namespace {

namespace sm = sample_math;
using namespace sampling_detail;
constexpr int kThreads = 1024;  // one CTA per sampled row: the finish
constexpr int kSliceThreads = sample_split::kSliceThreads;  // one CTA per slice of a candidate-path row

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

// First kernel of every path: grid (samples, splits). The CTA of (sample, slice) stores the slice's
// greedy argmax (NaN skipped, lowest id on ties) in the scratch; on the candidate path it also
// keeps a superset of its slice's top_k (at most plan.cap tokens, by sample_split's rule; -inf and
// NaN are never candidates: the CPU's top_k keeps only tokens >= -FLT_MAX), and on the cut path
// slice 0 starts the row's state and clears its histogram.
__global__ void __launch_bounds__(kSliceThreads) candidates_kernel(const float* logits, int32_t V,
                                                                   const SampleRowParams* params,
                                                                   const int32_t* counts, sample_split::SplitPlan plan,
                                                                   SampleScratch scratch) {
  pdl_grid_start();
  const int sample = int(blockIdx.x), slice = int(blockIdx.y);
  if (sample >= counts[0]) return;
  const SampleRowParams p = params[sample];
  const bool cuts = sample_split::uses_cuts(plan, p.greedy != 0, p.top_k, p.top_p);
  const bool race = cuts || sample_split::uses_race(plan, p.greedy != 0, p.top_k, p.top_p);
  __shared__ uint32_t keys[sample_split::kMaxSlice];
  __shared__ uint32_t thread_max[kSliceThreads];
  __shared__ Shared sh;
  const float* x = logits + int64_t(p.row) * V;
  const int32_t begin = min(V, slice * plan.slice);
  const int n = min(V - begin, plan.slice);
  if (cuts && slice == 0) {  // the digit launches start from an empty select and histogram
    if (threadIdx.x == 0) {
      CutState st{};
      st.need = p.top_k;
      st.k_limit = st.p_limit = INT_MAX;
      scratch.cut[sample] = st;
    }
    for (int b = threadIdx.x; b < kBins; b += kSliceThreads) {
      scratch.cut_count[int64_t(sample) * kBins + b] = 0u;
      scratch.cut_mass[int64_t(sample) * kBins + b] = 0ull;
    }
  }
  if (race) {  // the race and cut paths need only the slice's maximum here
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
  if (!sample_split::uses_candidates(plan, p.greedy != 0, p.top_k)) return;  // block-uniform
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
  const TopRule rule = select_top_pruned<kSliceThreads>(keys, n, thread_max, p.top_k, plan.cap, sh);
  const int64_t out_base = int64_t(sample) * sample_split::kMaxCandidates + int64_t(slice) * plan.cap;
  const int32_t kept = gather_kept<kSliceThreads>(keys, n, rule, sh, [&](int i, int32_t pos) {
    scratch.cand_key[out_base + pos] = keys[i];
    scratch.cand_id[out_base + pos] = begin + i;
  });
  if (threadIdx.x == 0) scratch.cand_n[slot] = kept;
}

// Shared memory of the candidate finish (kept apart from Shared: the other finishes need none).
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

// Race path, second kernel (and the cut path's last): grid (samples, splits). Each slice's winner
// of the exponential race (sample_math::race_score against the row maximum, over the tokens at or
// above the min_p floor that pass the row's cuts; ties to the lower id).
__global__ void __launch_bounds__(kSliceThreads) race_kernel(const float* logits, int32_t V,
                                                             const SampleRowParams* params, const int32_t* counts,
                                                             sample_split::SplitPlan plan, SampleScratch scratch) {
  pdl_grid_start();
  const int sample = int(blockIdx.x), slice = int(blockIdx.y);
  if (sample >= counts[0]) return;
  const SampleRowParams p = params[sample];
  const bool cuts = sample_split::uses_cuts(plan, p.greedy != 0, p.top_k, p.top_p);
  if (p.greedy != 0 || !(cuts || sample_split::uses_race(plan, false, p.top_k, p.top_p))) return;  // block-uniform
  __shared__ Shared sh;
  float m;
  int32_t am;
  row_max_from_slices<kSliceThreads>(sample, plan, scratch, m, am, sh);
  if (!isfinite(m)) return;  // block-uniform: the finish falls back to the argmax
  const float* x = logits + int64_t(p.row) * V;
  const float floor = p.has_min_p ? sm::min_p_floor(m, p.temperature, p.log_min_p) : -FLT_MAX;
  const int32_t begin = min(V, slice * plan.slice), end = min(V, begin + plan.slice);
  Cut ck{false, 0u, INT_MAX}, cp = ck;
  if (cuts) {
    const CutState st = scratch.cut[sample];
    ck = top_k_cut(st), cp = top_p_cut(st);
  }
  float best = -std::numeric_limits<float>::infinity();
  int32_t best_id = INT_MAX;
  for (int32_t i = begin + int32_t(threadIdx.x); i < end; i += kSliceThreads) {
    const float v = x[i];
    if (!(v >= floor)) continue;
    const uint32_t key = sm::order_key(v);
    if (!passes(ck, key, i) || !passes(cp, key, i)) continue;
    const float sc = sm::race_score(v, m, p.inv_t, p.key, i);
    if (better(sc, i, best, best_id)) best = sc, best_id = i;
  }
  block_argmax<kSliceThreads>(best, best_id, sh);
  const int64_t slot = int64_t(sample) * sample_split::kMaxSplits + slice;
  if (threadIdx.x == 0) scratch.slice_race_v[slot] = best, scratch.slice_race_id[slot] = best_id;
}

// Race and cut paths, finish (one CTA per row, in sample_kernel): the best of the slices' winners.
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

// The finish of every row: one CTA per row.
__global__ void __launch_bounds__(kThreads, 1) sample_kernel(const float* logits, int32_t V,
                                                          const SampleRowParams* params, const int32_t* counts,
                                                          sample_split::SplitPlan plan, SampleScratch scratch,
                                                          int32_t* out) {
  pdl_grid_start();
  if (int(blockIdx.x) >= counts[0]) return;
  __shared__ Shared sh;
  const SampleRowParams p = params[blockIdx.x];
  if (sample_split::uses_candidates(plan, p.greedy != 0, p.top_k)) {
    __shared__ FinishShared fs;
    finish_from_candidates(logits + int64_t(p.row) * V, p, int(blockIdx.x), plan, scratch, out, sh, fs);
    return;
  }
  finish_from_race(p, int(blockIdx.x), plan, scratch, out, sh);  // the race and cut paths
}

}  // namespace

// Every launch below is programmatic-dependent (launch_pdl): each kernel starts with pdl_grid_start(),
// so the next one's CTAs are resident and waiting while the previous grid drains.
void apply_logit_edits(float* logits, int64_t vocab, const SampleRowParams* params, const LogitEdit* edits,
                       const int32_t* counts, int64_t max_edits, cudaStream_t stream) {
  if (max_edits <= 0) return;
  const int64_t blocks = std::min<int64_t>((max_edits + 255) / 256, 1024);
  launch_pdl(edit_kernel, dim3(unsigned(blocks)), dim3(256), 0, stream, logits, vocab, params, edits, counts, max_edits);
}

void sample_rows(const float* logits, int64_t vocab, const SampleRowParams* params, const int32_t* counts,
                 int max_samples, const SampleScratch& scratch, int32_t* out_tokens, cudaStream_t stream,
                 const SamplePaths& paths) {
  if (max_samples <= 0) return;
  const sample_split::SplitPlan plan = sample_split::split_plan(vocab);
  if (plan.splits <= 0 || vocab > INT_MAX)
    throw Error("sample_rows: vocabulary size " + std::to_string(vocab) + " outside 1.." +
                std::to_string(sample_split::kMaxVocab));
  if (!scratch.cand_key || !scratch.cut) throw Error("sample_rows: no split scratch (SamplingBuffers::scratch())");
  const int32_t V = int32_t(vocab);
  const dim3 slices(unsigned(max_samples), unsigned(plan.splits));
  launch_pdl(candidates_kernel, slices, dim3(kSliceThreads), 0, stream, logits, V, params, counts, plan, scratch);
  launch_cut_digits(logits, V, params, counts, plan, scratch, max_samples, paths, stream);
  if (paths.race) launch_pdl(race_kernel, slices, dim3(kSliceThreads), 0, stream, logits, V, params, counts, plan, scratch);
  launch_pdl(sample_kernel, dim3(unsigned(max_samples)), dim3(kThreads), 0, stream, logits, V, params, counts, plan, scratch,
             out_tokens);
}

}  // namespace striker::cuda
