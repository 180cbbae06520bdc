// Block-wide building blocks of the GPU sampler (sampling.cu, sampling_cut.cu): argmax and scan
// reductions, warp-aggregated radix histograms, the top-k selection over a shared-memory key array
// that both the per-slice candidate kernel and the per-row finish use, the row maximum from the
// slices' maxima, and the cuts of the cut path with their tie search. Templated on the
// block size NT (a multiple of 32, at most 1024). Every function must be called by all
// threads of the block together (they contain barriers).
#pragma once
#include <climits>
#include <cstdint>
#include <limits>

#include "backends/cuda/sampling/sampling.h"
#include "backends/sample_math.h"
#include "backends/sample_split.h"

namespace striker::cuda::sampling_detail {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kBins = 256;  // radix digits of 8 bits, 4 passes over a 32-bit key

struct Shared {
  unsigned cnt[kBins];
  unsigned long long mass[kBins];  // the cut path: a row's mass per bin (sample_math::mass_fixed units)
  float red_v[32];
  int32_t red_i[32];
  int32_t scan[32];
  // Results broadcast by one thread to the block.
  int32_t sel_bin, sel_count, nth;
  float best_v;
  int32_t best_i;
  unsigned long long sel_above;
  unsigned long long mass_warp[32];
};

__device__ __forceinline__ bool better(float v, int32_t i, float bv, int32_t bi) {
  return v > bv || (v == bv && i < bi);
}

// Block-wide (value desc, id asc) argmax; every thread gets the result. (-inf, INT_MAX) is
// the identity.
template <int NT>
__device__ void block_argmax(float& v, int32_t& i, Shared& sh) {
  constexpr int kWarps = NT / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(kFull, v, o);
    const int32_t oi = __shfl_xor_sync(kFull, i, o);
    if (better(ov, oi, v, i)) v = ov, i = oi;
  }
  if (lane == 0) sh.red_v[warp] = v, sh.red_i[warp] = i;
  __syncthreads();
  if (warp == 0) {
    v = lane < kWarps ? sh.red_v[lane] : -std::numeric_limits<float>::infinity();
    i = lane < kWarps ? sh.red_i[lane] : INT_MAX;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(kFull, v, o);
      const int32_t oi = __shfl_xor_sync(kFull, i, o);
      if (better(ov, oi, v, i)) v = ov, i = oi;
    }
    if (lane == 0) sh.best_v = v, sh.best_i = i;
  }
  __syncthreads();
  v = sh.best_v;
  i = sh.best_i;
  __syncthreads();  // sh.best_* may be rewritten by the next call
}

// Exclusive prefix sum of c over the block in thread order; `total` gets the block's sum.
template <int NT>
__device__ int32_t block_exclusive_scan(int32_t c, Shared& sh, int32_t& total) {
  constexpr int kWarps = NT / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int32_t incl = c;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t up = __shfl_up_sync(kFull, incl, o);
    if (lane >= o) incl += up;
  }
  if (lane == 31) sh.scan[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int32_t t = lane < kWarps ? sh.scan[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t up = __shfl_up_sync(kFull, t, o);
      if (lane >= o) t += up;
    }
    sh.scan[lane] = t;  // inclusive over warps; lanes past the last warp hold the total
  }
  __syncthreads();
  const int32_t before_warp = warp > 0 ? sh.scan[warp - 1] : 0;
  const int32_t result = before_warp + incl - c;
  total = sh.scan[31];
  __syncthreads();  // sh.scan may be rewritten by the next call
  return result;
}
template <int NT>
__device__ int32_t block_exclusive_scan(int32_t c, Shared& sh) {
  int32_t total;
  return block_exclusive_scan<NT>(c, sh, total);
}

// Histogram count for one element per lane (bin < 0: none). Lanes of a warp that hit the same bin
// are combined first (one match): logits cluster in a few top-byte bins, and thousands of shared
// atomics on one address would serialise. All 32 lanes must call it together.
__device__ __forceinline__ void hist_add(Shared& sh, int bin) {
  const unsigned active = __ballot_sync(kFull, bin >= 0);
  if (bin < 0) return;
  const unsigned group = __match_any_sync(active, bin);
  if ((threadIdx.x & 31) == unsigned(__ffs(group) - 1)) atomicAdd(&sh.cnt[bin], unsigned(__popc(group)));
}

template <int NT>
__device__ void clear_hist(Shared& sh) {
  for (int b = threadIdx.x; b < kBins; b += NT) sh.cnt[b] = 0;
  __syncthreads();
}

// Warp 0 (all 32 lanes): the highest bin b where the count of bins >= b reaches `need` (>= 1)
// -> sh.sel_bin (-1 when the whole histogram holds fewer), sh.sel_count = cnt[b], sh.nth =
// how many of bin b are needed. Lane l owns bins 255-8l down to 248-8l; a scan over lanes
// replaces a 256-step serial walk.
__device__ __forceinline__ void select_bin(Shared& sh, int32_t need) {
  const int lane = int(threadIdx.x & 31);
  int32_t c[8];
  int32_t sum = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) sum += c[j] = int32_t(sh.cnt[kBins - 1 - 8 * lane - j]);
  int32_t incl = sum;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t up = __shfl_up_sync(kFull, incl, o);
    if (lane >= o) incl += up;
  }
  const unsigned hit = __ballot_sync(kFull, incl >= need);
  if (hit == 0) {
    if (lane == 0) sh.sel_bin = -1;
    return;
  }
  if (lane != __ffs(hit) - 1) return;
  int32_t acc = incl - sum;  // counts of the higher lanes' bins
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    if (acc + c[j] >= need) {
      sh.sel_bin = kBins - 1 - 8 * lane - j, sh.sel_count = c[j], sh.nth = need - acc;
      return;
    }
    acc += c[j];
  }
}

// Which keys of a shared array a top-k selection keeps: key != 0 (0 marks "no candidate"),
// key >= lo, and, for key == tie, only the first r of them in array order.
struct TopRule {
  uint32_t lo;
  uint32_t tie;  // 0 when no tie split is needed (no kept key is 0)
  int32_t r;
};

// The best k keys of keys[0, n) (sample_math::order_key values; 0 = absent), as a TopRule
// keeping at most max(k, cap) keys: an 8-bit radix select from the top byte that stops as
// soon as the keys at or above the current prefix number at most `cap` (a superset of the
// best k; with cap == k that is exactly the best k), else splits the tied k-th key by array
// order. Fewer than k present keys: all of them.
template <int NT>
__device__ TopRule select_top(const uint32_t* keys, int n, int k, int cap, Shared& sh) {
  uint32_t prefix = 0, pmask = 0;
  int32_t need = k, above = 0;
  for (int pass = 0; pass < 4; ++pass) {
    const int shift = 24 - 8 * pass;
    clear_hist<NT>(sh);
    for (int base = 0; base < n; base += NT) {  // block-uniform bound: whole warps call hist_add
      const int i = base + int(threadIdx.x);
      int bin = -1;
      if (i < n) {
        const uint32_t key = keys[i];
        if (key != 0 && (key & pmask) == prefix) bin = int((key >> shift) & 0xFFu);
      }
      hist_add(sh, bin);
    }
    __syncthreads();
    if (threadIdx.x < 32) select_bin(sh, need);
    __syncthreads();
    const int32_t sel = sh.sel_bin, sel_count = sh.sel_count, nth = sh.nth;
    __syncthreads();  // sh.sel_* are rewritten by the next pass
    if (sel < 0) return TopRule{0u, 0u, 0};  // fewer than k keys (only possible in pass 0)
    prefix |= uint32_t(sel) << shift;
    pmask |= 0xFFu << shift;
    above += need - nth;  // keys in higher bins than the selected one
    need = nth;
    if (above + sel_count <= cap) return TopRule{prefix, 0u, 0};  // every key >= prefix fits
  }
  return TopRule{prefix, prefix, need};
}

// select_top over a slice's keys[0, n) after dropping the keys that cannot be among its best k: the
// k-th best of the block's per-thread maxima (thread_max[0, NT)) is a lower bound of the slice's k-th
// key (k distinct tokens reach it), which leaves the radix select a few hundred keys, not the slice.
template <int NT>
__device__ __forceinline__ TopRule select_top_pruned(uint32_t* keys, int n, const uint32_t* thread_max, int k, int cap, Shared& sh) {
  const uint32_t bound = select_top<NT>(thread_max, NT, k, k, sh).lo;
  if (bound > 0)
    for (int i = threadIdx.x; i < n; i += NT)
      if (keys[i] < bound) keys[i] = 0;
  __syncthreads();
  return select_top<NT>(keys, n, k, cap, sh);
}

__device__ __forceinline__ bool rule_admits(const TopRule& r, uint32_t key) { return key != 0 && key >= r.lo; }

// Calls emit(index, position) for every key the rule keeps, positions 0, 1, ... in array
// order; returns how many. Each thread walks a contiguous range, so a block scan of the
// per-range counts gives array order (tie ranks and output positions at once: the counts of
// tied and other keys are packed in one int, both below 2^16 since n <= 65535).
template <int NT, class Emit>
__device__ int32_t gather_kept(const uint32_t* keys, int n, const TopRule& rule, Shared& sh, Emit emit) {
  const int chunk = (n + NT - 1) / NT;
  const int begin = min(n, int(threadIdx.x) * chunk), end = min(n, begin + chunk);
  int32_t c_tie = 0, c_other = 0;
  for (int i = begin; i < end; ++i) {
    const uint32_t key = keys[i];
    if (!rule_admits(rule, key)) continue;
    if (key == rule.tie) ++c_tie;
    else ++c_other;
  }
  int32_t packed_total;
  const int32_t packed_before = block_exclusive_scan<NT>(c_other | (c_tie << 16), sh, packed_total);
  int32_t tie_seen = packed_before >> 16;
  int32_t pos = (packed_before & 0xFFFF) + min(tie_seen, rule.r);
  for (int i = begin; i < end; ++i) {
    const uint32_t key = keys[i];
    if (!rule_admits(rule, key)) continue;
    if (key == rule.tie) {
      if (tie_seen++ < rule.r) emit(i, pos++);
    } else {
      emit(i, pos++);
    }
  }
  return (packed_total & 0xFFFF) + min(packed_total >> 16, rule.r);
}

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
    return v >= floor && sample_math::order_key(v) == key && passes(cut, key, i);
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

// The cuts a row's state has settled (off until their last digit).
__device__ __forceinline__ Cut top_k_cut(const CutState& s) { return Cut{s.k_on != 0, s.k_key, s.k_limit}; }
__device__ __forceinline__ Cut top_p_cut(const CutState& s) { return Cut{s.p_on != 0, s.p_key, s.p_limit}; }

}  // namespace striker::cuda::sampling_detail
