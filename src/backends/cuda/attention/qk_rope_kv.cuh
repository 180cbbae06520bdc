// Device code of the attention front (FLINT.md §4: per-head RMSNorm of q and k, RoPE on sliding
// layers, q to q_out, k and v into the paged cache), shared by its own kernels (qk_rope_kv.cu) and
// the QKV projections that run it in their epilogue (qkv_front.cu): one warp per (token, head),
// the same code, so the same bits.
#pragma once
#include <cstdint>

#include "backends/cuda/common/device_math.cuh"

namespace striker::cuda::front {

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

// The per-(token, head) math of the attention front (FLINT.md §4): RMSNorm of a q or k head with
// q_norm / k_norm, RoPE on sliding layers, and the write of q to q_out or of k / v into the paged
// cache. One warp holds one head: lane l holds elements [l*E, l*E+E), so the RoPE partner
// i + d/2 always sits in lane l ^ 16.

// Everything of one (token, head) that depends only on weights and the step's positions: the
// norm gammas and the RoPE cos/sin (a double-precision sincos per element, the slowest part).
// Computed before griddepcontrol.wait (see qk_rope_kv_kernel).
template <int E>
struct Prep {
  float gamma[E], cs[E], sn[E];
};

// head < nh: q head; < nh + nkv: k head; else v head. inv_freq nullptr: NoPE layer.
template <int E>
__device__ __forceinline__ void prepare(Prep<E>& pr, int t, int head, int nh, int nkv, const float* __restrict__ q_norm_w,
                                        const float* __restrict__ k_norm_w, const int32_t* __restrict__ positions,
                                        const float* __restrict__ inv_freq) {
  const int lane = threadIdx.x & 31;
  const bool is_v = head >= nh + nkv;
  const bool rope = !is_v && inv_freq != nullptr;
  if (!is_v) {
    const float* w = head < nh ? q_norm_w : k_norm_w;
#pragma unroll
    for (int e = 0; e < E; ++e) pr.gamma[e] = w[lane * E + e];
  }
  if (rope) {
    const float p = float(positions[t]);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int i = (lane & 15) * E + e;  // frequency index < d/2
      const float phi = __fmul_rn(p, inv_freq[i]);
      double sd, cd;
      sincos(double(phi), &sd, &cd);  // double keeps cos/sin accurate for φ up to ~2.6e5
      pr.cs[e] = round_bf16(float(cd));
      pr.sn[e] = round_bf16(float(sd));
    }
  }
}

// x: this lane's E bf16 values of the head (as floats). Normalizes (q, k), rotates (q, k on RoPE
// layers) and stores the head for token t. Called by all 32 lanes of the warp together.
template <int E>
__device__ __forceinline__ void finish(float (&x)[E], const Prep<E>& pr, int t, int head, int nh, int nkv, float eps,
                                       const float* __restrict__ inv_freq, const int64_t* __restrict__ slots,
                                       int block_size, bf16_t* __restrict__ k_cache, bf16_t* __restrict__ v_cache,
                                       bf16_t* __restrict__ q_out) {
  constexpr int d = 32 * E;
  const int lane = threadIdx.x & 31;
  const bool is_v = head >= nh + nkv;
  const bool rope = !is_v && inv_freq != nullptr;
  if (!is_v) {
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
  bf16_t* dst;
  if (head < nh) {
    dst = q_out + (int64_t(t) * nh + head) * d;
  } else {
    const int kvh = is_v ? head - nh - nkv : head - nh;
    const int64_t slot = slots[t];
    const int64_t block = slot / block_size, off = slot % block_size;
    bf16_t* cache = is_v ? v_cache : k_cache;
    dst = cache + ((block * nkv + kvh) * block_size + off) * d;
  }
  store_lane<E>(dst + lane * E, x);
}

}  // namespace striker::cuda::front
