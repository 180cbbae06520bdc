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
constexpr int kThreads = 1024;  // one CTA per sampled row: the finish
constexpr int kSliceThreads = sample_split::kSliceThreads;  // one CTA per slice of a candidate-path row
constexpr int kDigitThreads = 256;  // one CTA per slice in the cut path's digit launches
constexpr int kDigitWarps = kDigitThreads / 32;

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

// The id of the n-th (1-based) lowest-id token of x[begin, end) with key `key` that passes `floor`
// and `cut` (INT_MAX if fewer). Each thread owns a contiguous id range; a block scan of the
// per-range counts finds the range holding the n-th one. Only a cut that falls inside a run of
// equal logits needs it, and then on one slice: the one holding that token.
template <int NT>
__device__ int32_t nth_tied_id(const float* x, int32_t begin, int32_t end, float floor, const Cut& cut, uint32_t key,
                               int32_t n, Shared& sh) {
  const int32_t chunk = (end - begin + NT - 1) / NT;
  const int32_t lo = min(end, begin + int32_t(threadIdx.x) * chunk), hi = min(end, lo + chunk);
  auto match = [&](int32_t i) {
    const float v = x[i];
    return v >= floor && sm::order_key(v) == key && passes(cut, key, i);
  };
  int32_t c = 0;
  for (int32_t i = lo; i < hi; ++i) c += match(i);
  if (threadIdx.x == 0) sh.nth = INT_MAX;
  const int32_t before = block_exclusive_scan<NT>(c, sh);  // its barriers also publish sh.nth
  if (before < n && before + c >= n) {
    int32_t need = n - before;
    for (int32_t i = lo; i < hi; ++i)
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
// row's m and am, whatever the split (max and the tie rule do not depend on the order).
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

// The cuts a row's state has settled (off until their last digit).
__device__ __forceinline__ Cut top_k_cut(const CutState& s) { return Cut{s.k_on != 0, s.k_key, s.k_limit}; }
__device__ __forceinline__ Cut top_p_cut(const CutState& s) { return Cut{s.p_on != 0, s.p_key, s.p_limit}; }

// Warp 0 (all 32 lanes), on the row's histogram of a top_p digit in sh: the first bin from the top
// where the mass ranked above the bucket (`above`) plus the bins down to it reaches `target` ->
// sh.sel_bin, sh.sel_count, sh.sel_above (the mass ranked above that bin). Lane l owns bins 255-8l
// down to 248-8l, a scan over lanes finds the lane, the lane walks its 8 bins. The sums are exact
// integers, so the bins of a digit add up to their parent bin and the crossing always exists; were it
// missing (it cannot be), the lowest non-empty bin is taken, as the CPU walk would keep everything.
__device__ __forceinline__ void select_mass_bin(Shared& sh, unsigned long long above, double target) {
  const int lane = int(threadIdx.x & 31);
  unsigned long long c[8], sum = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) sum += c[j] = sh.mass[kBins - 1 - 8 * lane - j];
  unsigned long long incl = sum;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned long long up = __shfl_up_sync(kFull, incl, o);
    if (lane >= o) incl += up;
  }
  const unsigned hit = __ballot_sync(kFull, double(above + incl) >= target);
  if (lane != (hit != 0 ? __ffs(hit) - 1 : 0)) return;
  if (hit != 0) {
    unsigned long long acc = above + incl - sum;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int b = kBins - 1 - 8 * lane - j;
      if (sh.cnt[b] != 0 && double(acc + c[j]) >= target) {
        sh.sel_bin = b, sh.sel_count = int32_t(sh.cnt[b]), sh.sel_above = acc;
        return;
      }
      acc += c[j];
    }
  }
  unsigned long long acc = above;  // not reached with exact sums: the lowest non-empty bin
  sh.sel_bin = -1, sh.sel_count = 0, sh.sel_above = above;
  for (int b = kBins - 1; b >= 0; --b) {
    if (sh.cnt[b] == 0) continue;
    sh.sel_bin = b, sh.sel_count = int32_t(sh.cnt[b]), sh.sel_above = acc;
    acc += sh.mass[b];
  }
}

// The last CTA of a cut's last digit: the id of the n-th (1-based, lowest ids first) token of the
// row in bin `bin` of that digit (key == `key`), from every slice's count of the bin: the slice
// holding it is found by a scan over the slices, then only that slice is searched.
__device__ int32_t nth_tied_in_row(const float* x, int32_t V, int sample, const sample_split::SplitPlan& plan,
                                   const SampleScratch& scratch, int bin, float floor, const Cut& cut, uint32_t key,
                                   int32_t n, Shared& sh) {
  const int j = int(threadIdx.x);
  const int32_t c = j < plan.splits
                        ? int32_t(__ldcg(scratch.cut_slice_count + (int64_t(sample) * sample_split::kMaxSplits + j) * kBins + bin))
                        : 0;
  if (j == 0) sh.sel_bin = -1;
  const int32_t before = block_exclusive_scan<kDigitThreads>(c, sh);  // its barriers also publish sh.sel_bin
  if (before < n && before + c >= n) sh.sel_bin = j, sh.sel_count = n - before;
  __syncthreads();
  const int slice = sh.sel_bin;
  const int32_t need = sh.sel_count;
  __syncthreads();
  if (slice < 0) return INT_MAX;  // block-uniform; fewer than n tied tokens (not reached: n <= the bin's count)
  const int32_t begin = min(V, slice * plan.slice);
  return nth_tied_id<kDigitThreads>(x, begin, min(V, begin + plan.slice), floor, cut, key, need, sh);
}

// A digit's histogram, one per warp, so a hot bin (most logits share a top byte) is not fought over
// by the CTA's warps. Each token is one shared atomic per counter, with no warp votes: a vote's
// reduction over the lanes of one bin compiles to a loop over the warp's distinct bins, and its
// latency sits between every two tokens. top_p's mass (sample_math::mass_fixed: <= 2^44, 45 bits)
// goes into three 15-bit parts with 32-bit atomics (a 64-bit shared atomic is a compare-and-swap
// loop); a warp adds at most kMaxSlice / kDigitWarps = 1024 tokens, so each part's sum fits 32 bits.
constexpr int kMassPartBits = 15;
struct DigitHist {
  unsigned cnt[kDigitWarps][kBins];
  unsigned mass[3][kDigitWarps][kBins];
};
static_assert(sample_split::kMaxSlice / kDigitWarps * (1u << kMassPartBits) <= 0xFFFFFFFFu, "mass part overflow");

template <bool kMass>
__device__ __forceinline__ void digit_hist_add(DigitHist& dh, int bin, unsigned long long w) {
  if (bin < 0) return;
  const int warp = int(threadIdx.x >> 5);
  atomicAdd(&dh.cnt[warp][bin], 1u);
  if (kMass) {
#pragma unroll
    for (int part = 0; part < 3; ++part)
      atomicAdd(&dh.mass[part][warp][bin], unsigned(w >> (kMassPartBits * part)) & ((1u << kMassPartBits) - 1));
  }
}

// Cut path, one digit of a radix select: grid (samples, splits), launched 8 times per step (digits
// 0-3: top_k's select on the keys; 4-7: top_p's on the mass). The slices add their tokens of the
// current bucket to the row's histogram of the digit (global atomics: integer sums, so the result
// does not depend on the order); the last slice to finish picks the bin, clears the histogram and
// writes the row's state for the next digit. After the last digit of a cut it settles the cut,
// splitting a tied key by lowest ids as the CPU sampler does. The selection is the CPU walk's:
// top_k keeps the best k (value, then lower id) of the tokens at or above the min_p floor; top_p
// keeps a token while the mass ranked above it is below top_p of the mass of the tokens left.
__global__ void __launch_bounds__(kDigitThreads, 4) cut_digit_kernel(const float* logits, int32_t V,
                                                                  const SampleRowParams* params, const int32_t* counts,
                                                                  sample_split::SplitPlan plan, SampleScratch scratch,
                                                                  int digit) {
  pdl_grid_start();
  const int sample = int(blockIdx.x), slice = int(blockIdx.y);
  if (sample >= counts[0]) return;
  const SampleRowParams p = params[sample];
  if (!sample_split::uses_cuts(plan, p.greedy != 0, p.top_k, p.top_p)) return;  // block-uniform from here on
  const bool mass = digit >= 4;
  if (mass ? !(p.top_p < 1.0f) : p.top_k <= 0) return;
  CutState* state = scratch.cut + sample;
  const CutState s = *state;
  if (!mass && s.k_dead) return;
  __shared__ Shared sh;
  __shared__ DigitHist dh;
  __shared__ int last;
  float m;
  int32_t am;
  row_max_from_slices<kDigitThreads>(sample, plan, scratch, m, am, sh);
  if (!isfinite(m)) return;  // the finish falls back to the argmax
  const float floor = p.has_min_p ? sm::min_p_floor(m, p.temperature, p.log_min_p) : -FLT_MAX;
  const Cut ck = mass ? top_k_cut(s) : Cut{false, 0u, INT_MAX};
  const int shift = 24 - 8 * (digit & 3);
  const float* x = logits + int64_t(p.row) * V;
  const int32_t begin = min(V, slice * plan.slice);
  const int n = min(V - begin, plan.slice);
  for (int e = threadIdx.x; e < kDigitWarps * kBins; e += kDigitThreads) {
    (&dh.cnt[0][0])[e] = 0u;
    if (mass) (&dh.mass[0][0][0])[e] = (&dh.mass[1][0][0])[e] = (&dh.mass[2][0][0])[e] = 0u;
  }
  __syncthreads();
  constexpr int kBatch = 8;  // loads issued together
  for (int base = 0; base < n; base += kDigitThreads * kBatch) {
    float v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int j = base + u * kDigitThreads + int(threadIdx.x);
      v[u] = j < n ? x[begin + j] : std::numeric_limits<float>::quiet_NaN();  // NaN never passes the floor
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int32_t i = begin + base + u * kDigitThreads + int(threadIdx.x);
      const uint32_t key = sm::order_key(v[u]);
      int bin = -1;
      unsigned long long w = 0;
      if (v[u] >= floor && passes(ck, key, i) && (key & s.pmask) == s.prefix) {
        bin = int((key >> shift) & 0xFFu);
        if (mass) w = sm::mass_fixed(v[u], m, p.inv_t);
      }
      if (mass) digit_hist_add<true>(dh, bin, w);
      else digit_hist_add<false>(dh, bin, 0ull);
    }
  }
  __syncthreads();
  const bool settles = digit == 3 || digit == 7;  // a cut's last digit: each slice's counts are kept
  uint32_t* row_count = scratch.cut_count + int64_t(sample) * kBins;
  unsigned long long* row_mass = scratch.cut_mass + int64_t(sample) * kBins;
  uint16_t* slice_count = scratch.cut_slice_count + (int64_t(sample) * sample_split::kMaxSplits + slice) * kBins;
  for (int b = threadIdx.x; b < kBins; b += kDigitThreads) {
    unsigned c = 0;
    unsigned long long w = 0;
#pragma unroll
    for (int k = 0; k < kDigitWarps; ++k) {
      c += dh.cnt[k][b];
      if (mass)
        w += (unsigned long long)dh.mass[0][k][b] + ((unsigned long long)dh.mass[1][k][b] << kMassPartBits) +
             ((unsigned long long)dh.mass[2][k][b] << (2 * kMassPartBits));
    }
    if (settles) slice_count[b] = uint16_t(c);  // <= kMaxSlice
    if (c != 0) {
      atomicAdd(row_count + b, c);
      if (mass) atomicAdd(row_mass + b, w);
    }
  }
  __threadfence();  // this slice's adds are visible before its arrival is
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&state->arrivals, 1u) == unsigned(plan.splits - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int b = threadIdx.x; b < kBins; b += kDigitThreads) {  // the row's histogram; cleared for the next digit
    sh.cnt[b] = __ldcg(row_count + b);
    row_count[b] = 0u;
    if (mass) {
      sh.mass[b] = __ldcg(row_mass + b);
      row_mass[b] = 0ull;
    }
  }
  __syncthreads();
  CutState t = s;
  t.arrivals = 0;
  if (!mass) {
    if (threadIdx.x < 32) select_bin(sh, s.need);
    __syncthreads();
    const int32_t sel = sh.sel_bin, tie = sh.sel_count, nth = sh.nth;
    __syncthreads();  // nth_tied_id below rewrites sh.nth
    if (sel < 0) {  // fewer than top_k tokens pass the floor (only possible at digit 0): no cut
      t.k_dead = 1;
    } else {
      t.prefix |= uint32_t(sel) << shift;
      t.pmask |= 0xFFu << shift;
      t.need = nth;
      if (digit == 3) {  // settled: need = how many of the tokens with key == prefix stay (the lowest ids)
        t.k_on = 1;
        t.k_key = t.prefix;
        t.k_limit = tie > t.need ? nth_tied_in_row(x, V, sample, plan, scratch, sel, floor, Cut{false, 0u, INT_MAX},
                                                   t.prefix, t.need, sh)
                                 : INT_MAX;
      }
    }
    if (t.k_dead || digit == 3) t.prefix = t.pmask = 0u;  // top_p's select starts afresh
  } else {
    if (digit == 4) {  // the row's mass, and top_p of it (in the same units)
      unsigned long long total = 0;
      for (int b = threadIdx.x; b < kBins; b += kDigitThreads) total += sh.mass[b];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(kFull, total, o);
      if ((threadIdx.x & 31) == 0) sh.mass_warp[threadIdx.x >> 5] = total;
      __syncthreads();
      total = 0;
      for (int w = 0; w < kDigitWarps; ++w) total += sh.mass_warp[w];
      t.target = double(p.top_p) * double(total);
      t.above = 0;
    }
    if (threadIdx.x < 32) select_mass_bin(sh, t.above, t.target);
    __syncthreads();
    const int32_t sel = sh.sel_bin, tie = sh.sel_count;
    t.above = sh.sel_above;
    __syncthreads();  // the shared results are read before anything below rewrites sh
    t.prefix |= uint32_t(sel) << shift;
    t.pmask |= 0xFFu << shift;
    if (digit == 7) {
      // The tokens with key == prefix all weigh w; the r-th of them (by id) has above + (r - 1) w
      // ranked before it and stays while that is below the target: r <= ceil((target - above) / w).
      const unsigned long long w = sm::mass_fixed(sm::key_float(t.prefix), m, p.inv_t);
      const double q = w == 0 ? double(tie) : (t.target - double(t.above)) / double(w);
      const int32_t keep = q >= double(tie) ? tie : max(1, int32_t(ceil(q)));
      t.p_on = 1;
      t.p_key = t.prefix;
      t.p_limit = tie > keep ? nth_tied_in_row(x, V, sample, plan, scratch, sel, floor, ck, t.prefix, keep, sh) : INT_MAX;
    }
  }
  if (threadIdx.x == 0) *state = t;
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
  for (int digit = 0; digit < 8; ++digit) {
    if (!(digit < 4 ? paths.top_k_cut : paths.top_p_cut)) continue;
    launch_pdl(cut_digit_kernel, slices, dim3(kDigitThreads), 0, stream, logits, V, params, counts, plan, scratch, digit);
  }
  if (paths.race) launch_pdl(race_kernel, slices, dim3(kSliceThreads), 0, stream, logits, V, params, counts, plan, scratch);
  launch_pdl(sample_kernel, dim3(unsigned(max_samples)), dim3(kThreads), 0, stream, logits, V, params, counts, plan, scratch,
             out_tokens);
}

}  // namespace striker::cuda
