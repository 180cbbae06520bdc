// Device pieces of the router kernels (router.cu): limits, the weight-row chunk loads for bf16 or
// fp32 router matrices, and the top-K selection of one token by one warp (FLINT.md §4: sigmoid,
// + bias, top-K with ties to the lower expert index, weights normalised and scaled by
// routed_scaling_factor).
#pragma once
#include "backends/cuda/common/device_math.cuh"

namespace striker::cuda {

constexpr int kRouterMaxExperts = 1024;
constexpr int kRouterMaxTopK = 8;
constexpr int kRouterDecodeMaxTokens = 8;
constexpr int kRouterSelectNarrow = 256;  // up to this many experts the selection holds 8 per lane

// 8 consecutive values of a router weight row, loaded with streaming loads (read once per step).
template <typename W>
struct RouterWeight;
template <>
struct RouterWeight<bf16_t> {
  static constexpr int kValuesPerChunk = 8;
  using Chunk = uint4;
  static __device__ __forceinline__ Chunk load(const bf16_t* p) { return load_stream(p); }
  static __device__ __forceinline__ void unpack(const Chunk& c, float (&f)[8]) { unpack8(c, f); }
};
template <>
struct RouterWeight<float> {
  static constexpr int kValuesPerChunk = 8;
  struct Chunk {
    float4 a, b;
  };
  static __device__ __forceinline__ Chunk load(const float* p) {
    return Chunk{__ldcs(reinterpret_cast<const float4*>(p)), __ldcs(reinterpret_cast<const float4*>(p + 4))};
  }
  static __device__ __forceinline__ void unpack(const Chunk& c, float (&f)[8]) {
    f[0] = c.a.x, f[1] = c.a.y, f[2] = c.a.z, f[3] = c.a.w, f[4] = c.b.x, f[5] = c.b.y, f[6] = c.b.z, f[7] = c.b.w;
  }
};

// A selecting lane's logits and biases of experts lane, lane + 32, ... (0 past E), every load issued
// before the first use.
template <int P, typename LogitOf>
__device__ __forceinline__ void router_select_load(LogitOf logit_of, int E, const float* __restrict__ bias, int lane,
                                                   float (&logit)[P], float (&b)[P]) {
#pragma unroll
  for (int i = 0; i < P; ++i) {
    const int e = lane + 32 * i;
    logit[i] = e < E ? logit_of(e) : 0.f;
    b[i] = e < E && bias != nullptr ? bias[e] : 0.f;
  }
}

// Selection of token t by one warp: the top K of sigmoid(logit) + bias (ties go to the lower expert
// index, as the spec requires), weights normalised and scaled; logit_of(e) gives the fp32 logit.
// Lane l holds experts l, l + 32, ... (P per lane: E <= 32·P), every load issued before the first
// use; K rounds of a warp-wide argmax in few instructions (the decode and the batched selection
// both run it; it replaced a shuffle argmax with the same ids and weight bits):
// - each score + bias becomes an order-preserving 32-bit key (0 for NaN and -inf, which the rule never
//   picks; +0 for -0, which compares equal to it), so a round's warp-wide maximum is one redux.sync and
//   its lowest expert among ties a second one (redux.sync: integers only on sm_90);
// - each lane tracks its best two keys (ties: the lower expert first), so a round costs the winner
//   lane a move of its second key up; only a lane that wins twice rescans its values;
// - the picks' scores are recomputed by the lanes that keep them (the same expression: the same bits)
//   and summed in pick order, as the rounds of router_select_warp add them.
__device__ __forceinline__ unsigned router_select_key(float sel) {
  const unsigned u = __float_as_uint(sel + 0.f);  // -0 + 0 = +0
  const unsigned k = u ^ (unsigned(int(u) >> 31) | 0x80000000u);
  return sel > -__builtin_huge_valf() ? k : 0u;
}

// s = sigmoid(x) = 1 / (1 + expf(-x)) of P values, the IEEE division's bits: its fast path written out
// (rcp.approx, one fma correction: what nvcc emits for a divisor in [2^-126, 2^126); every 1 + expf(-x)
// is >= 1), and the division itself only where a divisor is 2^126 or more, NaN or inf, behind one
// branch for all P. The compiler's own division puts a slow-path branch around each quotient, which kept
// the P exponentials and reciprocals from overlapping: 1,274 -> 452 cycles for a lane's 8 keys, the whole
// selection 3,038 -> 2,210 (H200, one warp alone; same ids and weight bits), NVFP4 8K step -0.027 ms
// (seventeenth session, docs/performance.md).
template <int P>
__device__ __forceinline__ void router_sigmoids(const float (&x)[P], float (&s)[P]) {
  float d[P];
  bool slow = false;
#pragma unroll
  for (int i = 0; i < P; ++i) {
    d[i] = 1.0f + expf(-x[i]);
    float r, e, en;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d[i]));
    asm("fma.rn.f32 %0, %1, %2, 0fBF800000;" : "=f"(e) : "f"(d[i]), "f"(r));  // d·r - 1
    asm("sub.ftz.f32 %0, 0f80000000, %1;" : "=f"(en) : "f"(e));               // -(d·r - 1), as nvcc forms it
    asm("fma.rn.f32 %0, %1, %2, %1;" : "=f"(s[i]) : "f"(r), "f"(en));
    slow = slow || !(d[i] < 0x1p126f);
  }
  if (slow) {
#pragma unroll
    for (int i = 0; i < P; ++i)
      if (!(d[i] < 0x1p126f)) s[i] = 1.0f / d[i];
  }
}

// Lane k < K of the selecting warp holds pick k (`mine`): its score (the same sigmoid expression: the
// same bits) and, summed in pick order, the weights; writes token t's ids and weights.
template <typename LogitOf>
__device__ __forceinline__ void router_write_picks(LogitOf logit_of, int mine, int lane, int t, int K, bool norm,
                                                   float rsf, int32_t* __restrict__ ids, float* __restrict__ weights) {
  const float xm[1] = {logit_of(mine)};
  float sm[1];
  router_sigmoids<1>(xm, sm);
  const float s = lane < K ? sm[0] : 0.f;
  float picked_sum = 0.f;
  for (int k = 0; k < K; ++k) picked_sum += __shfl_sync(0xffffffffu, s, k);
  if (lane < K) {
    ids[t * K + lane] = mine;
    weights[t * K + lane] = (norm ? s / (picked_sum + 1e-20f) : s) * rsf;
  }
}

template <int P, typename LogitOf>
__device__ __forceinline__ void router_select_warp_redux(LogitOf logit_of, int t, int E, int K,
                                                         const float* __restrict__ bias, bool norm, float rsf,
                                                         int32_t* __restrict__ ids, float* __restrict__ weights) {
  const int lane = threadIdx.x & 31;
  float logit[P], b[P];
  router_select_load<P>(logit_of, E, bias, lane, logit, b);
  unsigned key[P];
  float score[P];
  router_sigmoids<P>(logit, score);
#pragma unroll
  for (int i = 0; i < P; ++i) key[i] = lane + 32 * i < E ? router_select_key(score[i] + b[i]) : 0u;
  // The lane's best two keys not yet picked (0: none) and their experts; in increasing expert order with
  // a strict > (ties: the lower expert first).
  unsigned b1 = 0, b2 = 0, picked = 0;  // picked: bit i = expert lane + 32·i was picked
  int e1 = 0, e2 = 0;
  auto best_two = [&]() {
    b1 = b2 = 0;
#pragma unroll
    for (int i = 0; i < P; ++i) {
      const unsigned k = (picked >> i) & 1u ? 0u : key[i];
      if (k > b1) {
        b2 = b1, e2 = e1;
        b1 = k, e1 = lane + 32 * i;
      } else if (k > b2) {
        b2 = k, e2 = lane + 32 * i;
      }
    }
  };
  best_two();
  bool second_known = true;  // b2 is the lane's second best (false after it moved up to b1)
  int mine = 0;              // lane k keeps the k-th pick
  for (int k = 0; k < K; ++k) {
    const unsigned m = __reduce_max_sync(0xffffffffu, b1);
    int e = E - 1;  // nothing left to pick (NaN or -inf scores): router_select_warp's index
    if (m != 0u) {
      e = int(__reduce_min_sync(0xffffffffu, b1 == m ? unsigned(e1) : 0xffffffffu));
      if (lane == (e & 31)) {  // the winner's lane: its next best moves up
        picked |= 1u << (e >> 5);
        if (second_known) {
          b1 = b2, e1 = e2;
          second_known = false;
        } else {
          best_two();
          second_known = true;
        }
      }
    }
    if (lane == k) mine = e;
  }
  router_write_picks(logit_of, mine, lane, t, K, norm, rsf, ids, weights);
}

// Token t's selection by the 8 warps of its CTA (the decode router up to 256 experts), by ranks instead
// of K dependent rounds (one warp's rounds: ~1,600 of its ~2,200 cycles). Warp w, lane l holds expert
// e = 32w + l (E <= 256) and its logit (any value past E). Each key's rank in its warp (31 shuffles,
// ties: the lower lane = the lower expert) puts
// the warp's best K at candidates w·K + rank; then threads i < 8K rank candidate i among all 8K (ties:
// the lower candidate index, which orders equal keys by expert too) and the K best become the picks.
// Keys are the round selection's (router_select_key of the same sigmoid + bias), a pick whose key is 0
// (NaN / -inf: nothing left) is expert E - 1, and the weights are summed in pick order: the same ids and
// weight bits as router_select_warp_redux. Every thread of the CTA calls it.
constexpr int kCtaSelectWarps = 8;
struct CtaSelectSmem {
  unsigned key[kCtaSelectWarps * kRouterMaxTopK];
  int expert[kCtaSelectWarps * kRouterMaxTopK];
  int pick[kRouterMaxTopK];
};
template <typename LogitOf>
__device__ __forceinline__ void router_select_cta_rank(float logit, float b, LogitOf logit_of, int t, int E, int K,
                                                       bool norm, float rsf, int32_t* __restrict__ ids,
                                                       float* __restrict__ weights, CtaSelectSmem& sm) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int e = 32 * warp + lane;
  const float xs[1] = {logit};
  float sg[1];
  router_sigmoids<1>(xs, sg);
  const unsigned key = e < E ? router_select_key(sg[0] + b) : 0u;
  unsigned rank = 0;
#pragma unroll
  for (int j = 1; j < 32; ++j) {
    const int o = (lane + j) & 31;
    const unsigned kj = __shfl_sync(0xffffffffu, key, o);
    rank += (kj > key || (kj == key && o < lane)) ? 1u : 0u;
  }
  if (rank < unsigned(K)) {
    sm.key[warp * K + int(rank)] = key;
    sm.expert[warp * K + int(rank)] = e;
  }
  __syncthreads();
  if (warp >= 2) return;
  const int nc = kCtaSelectWarps * K, i = int(threadIdx.x);
  if (i < nc) {
    const unsigned ki = sm.key[i];
    unsigned r = 0;
#pragma unroll 8
    for (int j = 0; j < nc; ++j) {
      const unsigned kj = sm.key[j];
      r += (kj > ki || (kj == ki && j < i)) ? 1u : 0u;
    }
    if (r < unsigned(K)) sm.pick[r] = ki != 0u ? sm.expert[i] : E - 1;
  }
  asm volatile("bar.sync 1, 64;" ::: "memory");  // warps 0 and 1
  if (warp != 0) return;
  const int mine = lane < K ? sm.pick[lane] : 0;
  router_write_picks(logit_of, mine, lane, t, K, norm, rsf, ids, weights);
}

}  // namespace striker::cuda
