// The per-(token, head) math of the attention front (FLINT.md §4): RMSNorm of a q or k head with
// q_norm / k_norm, RoPE on sliding layers. One warp holds one head: lane l holds elements
// [l*E, l*E+E), so the RoPE partner i + d/2 always sits in lane l ^ 16. Shared by the front kernel
// (qk_rope_kv.cu) and the one-token decode attention kernel that runs the front itself
// (attention_decode.cuh, pipe_front), so both give the same bits.
#pragma once
#include <cstdint>

#include "backends/cuda/common/device_math.cuh"

namespace striker::cuda::qk_front {

// A lane's E consecutive bf16 values of a head in one 2-, 4- or 8-byte access.
template <int E>
struct LaneVec;
template <>
struct LaneVec<1> {
  using T = unsigned short;
};
template <>
struct LaneVec<2> {
  using T = unsigned int;
};
template <>
struct LaneVec<4> {
  using T = uint2;
};
template <int E>
__device__ __forceinline__ void lane_to_float(const typename LaneVec<E>::T& v, float (&x)[E]) {
  const auto* b = reinterpret_cast<const bf16_t*>(&v);
#pragma unroll
  for (int e = 0; e < E; ++e) x[e] = __bfloat162float(b[e]);
}
template <int E>
__device__ __forceinline__ void store_lane(bf16_t* dst, const float (&x)[E]) {
  typename LaneVec<E>::T v;
  auto* b = reinterpret_cast<bf16_t*>(&v);
#pragma unroll
  for (int e = 0; e < E; ++e) b[e] = __float2bfloat16_rn(x[e]);
  *reinterpret_cast<typename LaneVec<E>::T*>(dst) = v;
}
// This lane's E values of the head at `head` in one access (a plain load: callers read it after
// griddepcontrol.wait; the head is 2·32·E-byte aligned).
template <int E>
__device__ __forceinline__ void load_lane(const bf16_t* head, float (&x)[E]) {
  lane_to_float<E>(*reinterpret_cast<const typename LaneVec<E>::T*>(head + (threadIdx.x & 31) * E), x);
}

// Everything of one (token, head) that depends only on weights and the step's positions: the
// norm gammas and the RoPE cos/sin (a double-precision sincos per element, the slowest part),
// computed before griddepcontrol.wait by both callers.
template <int E>
struct Prep {
  float gamma[E], cs[E], sn[E];
};

template <int E>
__device__ __forceinline__ void prepare_gamma(Prep<E>& pr, const float* __restrict__ w) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int e = 0; e < E; ++e) pr.gamma[e] = w[lane * E + e];
}

// cos/sin of this lane's frequencies at position p.
template <int E>
__device__ __forceinline__ void prepare_rope(Prep<E>& pr, int p, const float* __restrict__ inv_freq) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int i = (lane & 15) * E + e;  // frequency index < d/2
    const float phi = __fmul_rn(float(p), inv_freq[i]);
    double sd, cd;
    sincos(double(phi), &sd, &cd);  // double keeps cos/sin accurate for φ up to ~2.6e5
    pr.cs[e] = round_bf16(float(cd));
    pr.sn[e] = round_bf16(float(sd));
  }
}

// x: this lane's E values of a q or k head (as floats). Normalises it and, when `rope`, rotates it,
// rounding where FLINT.md §4 rounds. Called by all 32 lanes of the warp together.
template <int E>
__device__ __forceinline__ void norm_rotate(float (&x)[E], const Prep<E>& pr, bool rope, float eps) {
  constexpr int d = 32 * E;
  const int lane = threadIdx.x & 31;
  float ss = 0.f;
#pragma unroll
  for (int e = 0; e < E; ++e) ss += x[e] * x[e];
  ss = warp_sum(ss);
  const float r = 1.0f / sqrtf(ss / float(d) + eps);
#pragma unroll
  for (int e = 0; e < E; ++e) x[e] = round_bf16(round_bf16(x[e] * r) * pr.gamma[e]);
  if (rope) {
    const bool low = lane < 16;
    float partner[E];
#pragma unroll
    for (int e = 0; e < E; ++e) partner[e] = __shfl_xor_sync(0xffffffffu, x[e], 16);
#pragma unroll
    for (int e = 0; e < E; ++e)
      x[e] = low ? round_bf16(round_bf16(x[e] * pr.cs[e]) - round_bf16(partner[e] * pr.sn[e]))
                 : round_bf16(round_bf16(x[e] * pr.cs[e]) + round_bf16(partner[e] * pr.sn[e]));
  }
}

// Where the k or v head kvh of the token in cache slot `slot` lives: cache[block][kvh][offset][d].
__device__ __forceinline__ bf16_t* cache_row(bf16_t* cache, int64_t slot, int block_size, int nkv, int kvh, int d) {
  const int64_t block = slot / block_size, off = slot % block_size;
  return cache + ((block * nkv + kvh) * block_size + off) * d;
}

}  // namespace striker::cuda::qk_front
