// The sampler's cut path (see sampling.h): each 8-bit digit of the top_k and top_p radix selects is
// one launch over a row's slices; the last slice to finish a digit picks its bin. sample_rows
// (sampling.cu) launches the first kernel, which starts each row's state, and the race kernels after.
#include "backends/cuda/sampling/sampling_cut.h"

#include <cfloat>
#include <climits>
#include <limits>

#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/sampling/sampling_block.cuh"
#include "backends/sample_math.h"

namespace striker::cuda {
namespace {

namespace sm = sample_math;
using namespace sampling_detail;
constexpr int kDigitThreads = 256;  // one CTA per slice in the cut path's digit launches
constexpr int kDigitWarps = kDigitThreads / 32;

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

}  // namespace

void launch_cut_digits(const float* logits, int32_t vocab, const SampleRowParams* params, const int32_t* counts,
                       const sample_split::SplitPlan& plan, const SampleScratch& scratch, int max_samples,
                       const SamplePaths& paths, cudaStream_t stream) {
  const dim3 slices(unsigned(max_samples), unsigned(plan.splits));
  for (int digit = 0; digit < 8; ++digit) {
    if (!(digit < 4 ? paths.top_k_cut : paths.top_p_cut)) continue;
    launch_pdl(cut_digit_kernel, slices, dim3(kDigitThreads), 0, stream, logits, vocab, params, counts, plan, scratch,
               digit);
  }
}

}  // namespace striker::cuda
