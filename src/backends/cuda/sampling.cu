#include "backends/cuda/sampling.h"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <limits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"
#include "backends/sample_math.h"

namespace striker::cuda {
namespace {

namespace sm = sample_math;
constexpr int kThreads = 1024;  // one CTA per sampled row
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFull = 0xffffffffu;
constexpr int kBins = 256;  // radix digits of 8 bits, 4 passes over a 32-bit key

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

struct Shared {
  unsigned cnt[kBins];
  double mass[kBins];
  float red_v[kWarps];
  int32_t red_i[kWarps];
  int32_t scan[kWarps];
  // Results broadcast by one thread to the block.
  int32_t sel_bin, sel_count, total, nth;
  float best_v;
  int32_t best_i;
  double sel_above, target;
};

__device__ __forceinline__ bool better(float v, int32_t i, float bv, int32_t bi) {
  return v > bv || (v == bv && i < bi);
}

// Block-wide (value desc, id asc) argmax; every thread gets the result.
__device__ void block_argmax(float& v, int32_t& i, Shared& sh) {
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
    v = sh.red_v[lane];
    i = sh.red_i[lane];
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

// Exclusive prefix sum of c over the block in thread order.
__device__ int32_t block_exclusive_scan(int32_t c, Shared& sh) {
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
    int32_t t = sh.scan[lane];
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t up = __shfl_up_sync(kFull, t, o);
      if (lane >= o) t += up;
    }
    sh.scan[lane] = t;  // inclusive over warps
  }
  __syncthreads();
  const int32_t before_warp = warp > 0 ? sh.scan[warp - 1] : 0;
  const int32_t result = before_warp + incl - c;
  __syncthreads();  // sh.scan may be rewritten by the next call
  return result;
}

// Histogram add for one element per lane (bin < 0: none). Lanes of a warp that hit the same
// bin are combined first: logits cluster in a few top-byte bins, and thousands of shared
// atomics on one address would serialise. All 32 lanes must call it together.
template <bool kMass>
__device__ void hist_add(Shared& sh, int bin, double w) {
  const unsigned lane = threadIdx.x & 31;
  unsigned pending = __ballot_sync(kFull, bin >= 0);
  for (int round = 0; pending; ++round) {
    if (round == 4) {  // many distinct bins in this warp: contention is low, add one by one
      if ((pending >> lane) & 1u) {
        atomicAdd(&sh.cnt[bin], 1u);
        if (kMass) atomicAdd(&sh.mass[bin], w);
      }
      break;
    }
    const int leader = __ffs(pending) - 1;
    const int b = __shfl_sync(kFull, bin, leader);
    const bool mine = ((pending >> lane) & 1u) && bin == b;
    const unsigned group = __ballot_sync(kFull, mine);
    if (kMass) {
      double s = mine ? w : 0.0;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(kFull, s, o);
      if (int(lane) == leader) atomicAdd(&sh.mass[b], s);
    }
    if (int(lane) == leader) atomicAdd(&sh.cnt[b], unsigned(__popc(group)));
    pending &= ~group;
  }
}

__device__ void clear_hist(Shared& sh, bool mass) {
  for (int b = threadIdx.x; b < kBins; b += kThreads) {
    sh.cnt[b] = 0;
    if (mass) sh.mass[b] = 0.0;
  }
  __syncthreads();
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
  const int32_t before = block_exclusive_scan(c, sh);  // its barriers also publish sh.nth
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

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* logits, int32_t V,
                                                          const SampleRowParams* params, const int32_t* counts,
                                                          int32_t* out) {
  pdl_grid_start();
  if (int(blockIdx.x) >= counts[0]) return;
  __shared__ Shared sh;
  const SampleRowParams p = params[blockIdx.x];
  const float* x = logits + int64_t(p.row) * V;
  const int tid = threadIdx.x;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();

  // 1. max and greedy argmax (NaN never counts; lowest id on ties).
  float m = kNegInf;
  int32_t am = INT_MAX;
  for (int32_t i = tid; i < V; i += kThreads) {
    const float v = x[i];
    if (v == v && better(v, i, m, am)) m = v, am = i;
  }
  block_argmax(m, am, sh);
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
      clear_hist(sh, false);
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
      clear_hist(sh, true);
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
  block_argmax(best, best_id, sh);
  if (tid == 0) out[blockIdx.x] = best_id == INT_MAX ? am : best_id;
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
                 int max_samples, int32_t* out_tokens, cudaStream_t stream) {
  if (max_samples <= 0) return;
  if (vocab <= 0 || vocab > INT_MAX) throw Error("sample_rows: vocabulary size " + std::to_string(vocab) + " out of range");
  sample_kernel<<<dim3(unsigned(max_samples)), dim3(kThreads), 0, stream>>>(logits, int32_t(vocab), params, counts,
                                                                            out_tokens);
  STRIKER_CUDA_CHECK_LAUNCH("sample_rows");
}

}  // namespace striker::cuda
