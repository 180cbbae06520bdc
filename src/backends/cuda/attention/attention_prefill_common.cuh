// What the two prefill attention kernels share (attention_prefill.cu: mma.sync; and
// attention_prefill_wgmma.cu: Hopper wgmma): the launch arguments, the host-side checks and
// split plan, and the per-thread pieces that depend only on the m16n8 accumulator layout both
// use (a thread holds rows g and g+8 = head g of two tokens, columns 2c, 2c+1 of each 8-column
// tile): the Q fragment load, one online-softmax step and the epilogue.
#pragma once
#include <cstdint>

#include "backends/cuda/attention/attention.h"
#include "backends/cuda/attention/attention_prefill_layout.h"
#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/common/tensor_core.cuh"

namespace striker::cuda::prefill {

constexpr float kNegInf = -__builtin_huge_valf();
constexpr float kLog2e = 1.4426950408889634f;

struct PrefillArgs {
  const bf16_t* q;
  const bf16_t* kc;
  const bf16_t* vc;
  const float* sinks;            // [n_heads] or nullptr
  const int32_t* positions;      // [NQ]
  const int32_t* table_offset;   // [NQ]
  const int32_t* block_tables;
  const int32_t* tiles;          // [num_tiles][2]: first query, count
  int num_tiles, nkv, block_size, window, chunk, num_splits;
  float* partials;               // split records, or nullptr: normalise and write `out` here
  bf16_t* out;
  int block_shift;               // log2(block_size) when a power of two (shifts, not divisions), else -1
};

// Checks the arguments (throws striker::Error) and plans the key splits for key tiles of
// `key_tile` keys. Returns false when there is nothing to do.
bool plan_prefill(const bf16* q, const bf16* k_cache, const bf16* v_cache, const float* sinks,
                  const AttentionShape& s, const AttentionQueries& qs, const PrefillTiles& tiles,
                  const AttentionScratch& scratch, bf16* out, int key_tile, PrefillArgs& args);
// The split combine after the kernel, when the plan split the key ranges.
void finish_prefill(const PrefillArgs& args, const AttentionShape& s, const AttentionQueries& qs,
                    const PrefillTiles& tiles, bf16* out, cudaStream_t stream);

#if defined(__CUDACC__)
// 2^(m_old - m_new), taking an empty state (m_old = -inf) to a zero weight instead of NaN.
__device__ __forceinline__ float rescale(float m_old, float m_new) {
  return m_old == kNegInf ? 0.f : exp2f(m_old - m_new);
}

// Element offset of key `key`'s row (KV head kvh) in the paged cache, through the sequence's
// block table.
__device__ __forceinline__ int64_t kv_row_offset(const PrefillArgs& a, const int32_t* table, int key, int kvh) {
  int blk, in;
  if (a.block_shift >= 0) {
    blk = key >> a.block_shift;
    in = key & ((1 << a.block_shift) - 1);
  } else {
    blk = key / a.block_size;
    in = key - blk * a.block_size;
  }
  return ((int64_t(table[blk]) * a.nkv + kvh) * a.block_size + in) * kHeadDim;
}

// Q rows of this thread (head g of tokens tok[0], tok[1]) as the A operand of the 8 k steps
// (the mma.sync m16n8k16 A fragment, which is also wgmma's register A layout); zeros past n.
__device__ __forceinline__ void load_q_fragments(const PrefillArgs& a, int q0, int n, int kvh, int g, int lane,
                                                 const int (&tok)[2], uint32_t (&qa)[kHeadDim / 16][4]) {
  const int nh = a.nkv * kGroup;
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int t = tok[q_frag_half(i)];
      qa[ks][i] = 0u;
      if (t < n) {
        const bf16_t* src = a.q + (int64_t(q0 + t) * nh + kvh * kGroup + g) * kHeadDim + q_frag_dim(lane, ks, i);
        qa[ks][i] = __ldg(reinterpret_cast<const unsigned int*>(src));
      }
    }
}

// 2^x in one MUFU.EX2 (ex2.approx.ftz; exp2f's non-ftz form adds denormal fix-ups around it).
// 2^-inf = +0; results below 2^-126 flush to 0, far under P's bf16 rounding.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// One online-softmax step over NT 8-key column tiles of raw scores s (Q·K, masked keys = -inf):
// new row maxima m (log2 domain: score · scale, scale = log2(e)/sqrt(d)), P = 2^(s·scale - m)
// in place with the scale folded into one fma, the running sums l (this thread's columns only)
// and the accumulators o rescaled. m is exactly the maximum of the rounded scaled scores
// (rounding is monotonic), as when the scores are scaled first. Masked keys give 2^-inf = 0
// without a branch: a row with no visible key yet (m = -inf) subtracts 0 instead of m.
template <int NT>
__device__ __forceinline__ void online_softmax_step(float (&s)[NT][4], float scale, float (&m)[2], float (&l)[2],
                                                    float (&o)[kHeadDim / 8][4]) {
  float mx[2] = {kNegInf, kNegInf};
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) mx[acc_half(i)] = fmaxf(mx[acc_half(i)], s[j][i]);
  float corr[2], rs[2] = {0.f, 0.f};
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // the 4 threads of a group hold one row's columns
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    mx[h] = fmaxf(m[h], mx[h] * scale);
    corr[h] = rescale(m[h], mx[h]);
    m[h] = mx[h];
    mx[h] = mx[h] == kNegInf ? 0.f : mx[h];
  }
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int h = acc_half(i);
      s[j][i] = exp2_ftz(fmaf(s[j][i], scale, -mx[h]));
      rs[h] += s[j][i];
    }
  l[0] = l[0] * corr[0] + rs[0];
  l[1] = l[1] * corr[1] + rs[1];
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j) {
    o[j][0] *= corr[0];
    o[j][1] *= corr[0];
    o[j][2] *= corr[1];
    o[j][3] *= corr[1];
  }
}

// P of k step kt (keys 16kt..16kt+15) as a bf16 A operand: the S accumulators of column tiles
// 2kt and 2kt+1 (p_reg_tile / p_reg_elem), each pair rounded to nearest-even by one
// cvt.rn.bf16x2 (the same rounding as pack_bf16x2, in one instruction instead of four).
template <int NT>
__device__ __forceinline__ void pack_p(const float (&s)[NT][4], int kt, uint32_t (&pa)[4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const __nv_bfloat162 v =
        __floats2bfloat162_rn(s[p_reg_tile(kt, r)][p_reg_elem(r)], s[p_reg_tile(kt, r)][p_reg_elem(r) + 1]);
    pa[r] = *reinterpret_cast<const uint32_t*>(&v);
  }
}

// Epilogue of this thread's two rows: a split record (m, l, unnormalised o) as
// attention_combine_kernel reads it, or, with the whole key range in this CTA, the sink added
// to the denominator and the normalised bf16 output.
__device__ __forceinline__ void store_rows(const PrefillArgs& a, int q0, int n, int kvh, int split, int g, int lane,
                                           const int (&tok)[2], float (&m)[2], float (&l)[2],
                                           const float (&o)[kHeadDim / 8][4]) {
  const int nh = a.nkv * kGroup;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  const int c2 = acc_col(lane, 0);  // this thread's first column in each 8-dim n tile
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (tok[h] >= n) continue;
    const int64_t qi = q0 + tok[h];
    if (a.partials) {
      float* rec = a.partials + ((qi * a.nkv + kvh) * a.num_splits + split) * (kGroup * (kHeadDim + 2));
      if ((lane & 3) == 0) {
        rec[2 * g] = m[h];
        rec[2 * g + 1] = l[h];
      }
      float* acc = rec + 2 * kGroup + g * kHeadDim;
#pragma unroll
      for (int j = 0; j < kHeadDim / 8; ++j)
        *reinterpret_cast<float2*>(acc + 8 * j + c2) = make_float2(o[j][2 * h], o[j][2 * h + 1]);
    } else {
      const float sink = a.sinks ? a.sinks[kvh * kGroup + g] * kLog2e : kNegInf;
      const float mf = fmaxf(m[h], sink);  // finite: the query's own key is in range
      const float cm = rescale(m[h], mf);
      const float f = cm / (l[h] * cm + rescale(sink, mf));
      bf16_t* dst = a.out + (qi * nh + kvh * kGroup + g) * kHeadDim;
#pragma unroll
      for (int j = 0; j < kHeadDim / 8; ++j)
        *reinterpret_cast<uint32_t*>(dst + 8 * j + c2) = pack_bf16x2(o[j][2 * h] * f, o[j][2 * h + 1] * f);
    }
  }
}
#endif

}  // namespace striker::cuda::prefill
