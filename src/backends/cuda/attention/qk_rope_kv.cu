#include "backends/cuda/attention/qk_rope_kv.h"
#include "backends/cuda/attention/qk_rope_kv.cuh"

#include <cmath>
#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/common/tensor_core.cuh"

namespace striker::cuda {
namespace {

constexpr int kWarps = 4;

using qk_front::Prep;

// head < nh: q head; < nh + nkv: k head; else v head. inv_freq nullptr: NoPE layer.
template <int E>
__device__ __forceinline__ void prepare(Prep<E>& pr, int t, int head, int nh, int nkv, const float* __restrict__ q_norm_w,
                                        const float* __restrict__ k_norm_w, const int32_t* __restrict__ positions,
                                        const float* __restrict__ inv_freq) {
  const bool is_v = head >= nh + nkv;
  if (!is_v) qk_front::prepare_gamma<E>(pr, head < nh ? q_norm_w : k_norm_w);
  if (!is_v && inv_freq != nullptr) qk_front::prepare_rope<E>(pr, positions[t], inv_freq);
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
  if (!is_v) qk_front::norm_rotate<E>(x, pr, inv_freq != nullptr, eps);
  bf16_t* dst;
  if (head < nh) {
    dst = q_out + (int64_t(t) * nh + head) * d;
  } else {
    const int kvh = is_v ? head - nh - nkv : head - nh;
    dst = qk_front::cache_row(is_v ? v_cache : k_cache, slots[t], block_size, nkv, kvh, d);
  }
  qk_front::store_lane<E>(dst + lane * E, x);
}

// One warp per (token, head) over q heads, then k heads, then v heads. The norm gammas and the
// RoPE cos/sin (a double-precision sincos per element, the slowest part of the kernel) are computed
// before griddepcontrol.wait, while the QKV GEMV in front still runs. That is safe because they
// depend only on weights and on the step's positions, which the step's metadata memcpy wrote before
// the step's first kernel started; only qkv (written by the GEMV in front) is read after the wait.
template <int E>
__global__ void __launch_bounds__(kWarps * 32) qk_rope_kv_kernel(
    const bf16_t* __restrict__ qkv, int T, int nh, int nkv, const float* __restrict__ q_norm_w,
    const float* __restrict__ k_norm_w, float eps, const int32_t* __restrict__ positions,
    const float* __restrict__ inv_freq, const int64_t* __restrict__ slots, int block_size,
    bf16_t* __restrict__ k_cache, bf16_t* __restrict__ v_cache, bf16_t* __restrict__ q_out) {
  pdl_launch_dependents();  // see launch.cuh
  constexpr int d = 32 * E;
  const int heads = nh + 2 * nkv;
  const int64_t item = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (item >= int64_t(T) * heads) {
    pdl_wait();  // no early exit past the wait (keeps the PDL contract simple)
    return;
  }
  const int t = int(item / heads), head = int(item % heads);
  const int lane = threadIdx.x & 31;
  Prep<E> pr;
  prepare<E>(pr, t, head, nh, nkv, q_norm_w, k_norm_w, positions, inv_freq);
  pdl_wait();  // qkv comes from the GEMV in front

  const bf16_t* src = qkv + (int64_t(t) * heads + head) * d + lane * E;
  float x[E];
#pragma unroll
  for (int e = 0; e < E; ++e) x[e] = __bfloat162float(src[e]);
  finish<E>(x, pr, t, head, nh, nkv, eps, inv_freq, slots, block_size, k_cache, v_cache, q_out);
}

// Steps of more than kPerHeadMaxTokens tokens: kTokensPerCta tokens per CTA. Their q|k|v rows (one
// contiguous range) are staged into shared memory with cp.async, all issued at once, so the bytes
// in flight do not depend on registers. Each token's RoPE cos/sin are computed once into shared
// memory (d/2 double sincos, prepare()'s expression) instead of once per head and lane.
//
// Then L = d/8 lanes take one head, 8 values each in 16-byte loads and stores (32/L heads per warp
// at once, all lanes in every shuffle: a head's kind only picks what is stored). The decode
// kernel's bits, step for step:
//  - the sum of squares: its lane l holds E = d/32 values, lane l = V·m + b of this layout's lane
//    m (V = 8/E); part[b] is its lane's partial, and its warp_sum (xor 16, 8, 4, 2, 1 of l) is
//    xor L/2 .. 1 of m across lanes, then V/2 .. 1 in registers;
//  - the norm in fp32, rounded where it rounds (bf16x2 conversions round each half alone);
//  - RoPE in bf16x2 arithmetic: x and cos/sin are bf16, so round_bf16(x·cos) is the bf16 product,
//    and round_bf16(a ± b) of two bf16 is the bf16 sum (fp32 then bf16 is a double rounding with
//    24 ≥ 2·8 + 2 bits: innocuous); the low half's "− partner·sin" is "+ partner·(−sin)" (the
//    table holds −sin there), round to nearest even being symmetric.
// The first staged form (one warp per head, 8-byte lane accesses, the rope in fp32 with a rounding
// per operation) ran 88 µs at 8192 tokens: instruction-bound (~150 instructions per head and lane).
// Up to this many tokens the one-warp-per-(token, head) kernel: at decode sizes the staged form has too few
// CTAs (8 at 16 tokens, 6.6 us per layer in the step timeline). Measured (H100, session 33, NVFP4 steps at
// 1K context, device ms, threshold 8 -> 64): 9 seqs 6.47 / 6.54 -> 6.50 / 6.55, 16 8.39 / 8.39 -> 8.21 / 8.24,
// 32 12.09 / 12.12 -> 12.03 / 12.05, 64 17.08 / 17.10 -> 17.04 / 17.11; BF16 16 seqs 12.61 / 12.57 -> 12.64 / 12.58.
constexpr int kPerHeadMaxTokens = 64;
constexpr int kTokenWarps = 8, kTokensPerCta = 2;
constexpr size_t kTokenMaxSmem = 40 * 1024;  // dynamic shared memory: Flint's 2 × 40 heads × 128 = 20 KiB

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  const __nv_bfloat162 r = __hmul2_rn(*reinterpret_cast<const __nv_bfloat162*>(&a),
                                      *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const uint32_t*>(&r);
}
__device__ __forceinline__ uint32_t bf16x2_add(uint32_t a, uint32_t b) {
  const __nv_bfloat162 r = __hadd2_rn(*reinterpret_cast<const __nv_bfloat162*>(&a),
                                      *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const uint32_t*>(&r);
}
__device__ __forceinline__ uint16_t bf16_bits(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }

template <int E>
__global__ void __launch_bounds__(kTokenWarps * 32) qk_rope_kv_token_kernel(
    const bf16_t* __restrict__ qkv, int T, int nh, int nkv, const float* __restrict__ q_norm_w,
    const float* __restrict__ k_norm_w, float eps, const int32_t* __restrict__ positions,
    const float* __restrict__ inv_freq, const int64_t* __restrict__ slots, int block_size,
    bf16_t* __restrict__ k_cache, bf16_t* __restrict__ v_cache, bf16_t* __restrict__ q_out) {
  extern __shared__ __align__(16) unsigned char smem[];
  pdl_launch_dependents();  // see launch.cuh
  constexpr int d = 32 * E, L = d / 8, V = 8 / E;
  // Per token and element j: cos of frequency j % (d/2), and sin signed as j's rotation uses it.
  __shared__ __align__(16) uint16_t cs_s[kTokensPerCta][d], sn_s[kTokensPerCta][d];
  __shared__ int64_t kv_base[kTokensPerCta];  // the token's cache row: ((block·nkv)·block_size + off)·d
  const int t0 = int(blockIdx.x) * kTokensPerCta, nt = min(kTokensPerCta, T - t0), heads = nh + 2 * nkv;
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31), m = lane % L;
  // Before the wait, as in the decode kernel: weights, positions and slots only.
  if (inv_freq != nullptr)
    for (int k = int(threadIdx.x); k < nt * (d / 2); k += kTokenWarps * 32) {
      const int tt = k / (d / 2), i = k % (d / 2);
      const float phi = __fmul_rn(float(positions[t0 + tt]), inv_freq[i]);
      double sd, cd;
      sincos(double(phi), &sd, &cd);  // double keeps cos/sin accurate for φ up to ~2.6e5
      const uint16_t c = bf16_bits(float(cd)), sn = bf16_bits(float(sd));
      cs_s[tt][i] = cs_s[tt][i + d / 2] = c;
      sn_s[tt][i] = sn ^ 0x8000u;  // the low half subtracts partner·sin
      sn_s[tt][i + d / 2] = sn;
    }
  if (int(threadIdx.x) < nt) {
    const int64_t slot = slots[t0 + int(threadIdx.x)];
    kv_base[threadIdx.x] = ((slot / block_size) * nkv * block_size + slot % block_size) * d;
  }
  float gq[8], gk[8];  // this lane's 8 gammas: the same elements of every head
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    gq[e] = q_norm_w[8 * m + e];
    gk[e] = k_norm_w[8 * m + e];
  }
  pdl_wait();  // qkv comes from the GEMM in front
  const int64_t row = int64_t(heads) * d;
  auto* rows = reinterpret_cast<bf16_t*>(smem);
  const bf16_t* src = qkv + int64_t(t0) * row;
  for (int c = int(threadIdx.x); c < nt * row / 8; c += kTokenWarps * 32) cp_async16(rows + c * 8, src + c * 8, true);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  constexpr int G = 32 / L;  // heads per warp at once
  for (int base = warp * G; base < nt * heads; base += kTokenWarps * G) {
    const int item = base + lane / L;
    const bool valid = item < nt * heads;
    int tt = 0, head = valid ? item : 0;  // item / heads and item % heads without a division
#pragma unroll
    for (int k = 1; k < kTokensPerCta; ++k)
      if (head >= heads) head -= heads, ++tt;
    const uint4 raw = *reinterpret_cast<const uint4*>(rows + (int64_t(tt) * heads + head) * d + 8 * m);
    float x[8];
    unpack8(raw, x);
    float part[V];
#pragma unroll
    for (int b = 0; b < V; ++b) {
      part[b] = 0.f;
#pragma unroll
      for (int e = 0; e < E; ++e) part[b] += x[b * E + e] * x[b * E + e];  // finish()'s `ss += x * x`
    }
#pragma unroll
    for (int o = L / 2; o >= 1; o >>= 1)
#pragma unroll
      for (int b = 0; b < V; ++b) part[b] += __shfl_xor_sync(0xffffffffu, part[b], o);
#pragma unroll
    for (int s = V / 2; s >= 1; s >>= 1)
#pragma unroll
      for (int b = 0; b < s; ++b) part[b] += part[b + s];
    const float r = 1.0f / sqrtf(part[0] / float(d) + eps);
    const bool is_q = head < nh;
    float y[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) y[e] = x[e] * r;
    unpack8(pack8(y), y);  // round_bf16(x·r)
#pragma unroll
    for (int e = 0; e < 8; ++e) y[e] *= is_q ? gq[e] : gk[e];
    uint4 n = pack8(y);  // round_bf16(round_bf16(x·r)·gamma)
    if (inv_freq != nullptr) {  // uniform: every lane rotates (v heads' results are not stored)
      const uint4 cs = *reinterpret_cast<const uint4*>(&cs_s[tt][8 * m]);
      const uint4 sn = *reinterpret_cast<const uint4*>(&sn_s[tt][8 * m]);
      uint32_t w[4] = {n.x, n.y, n.z, n.w};
      const uint32_t c[4] = {cs.x, cs.y, cs.z, cs.w}, sg[4] = {sn.x, sn.y, sn.z, sn.w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const uint32_t partner = __shfl_xor_sync(0xffffffffu, w[k], L / 2);  // element j ± d/2
        w[k] = bf16x2_add(bf16x2_mul(w[k], c[k]), bf16x2_mul(partner, sg[k]));
      }
      n = make_uint4(w[0], w[1], w[2], w[3]);
    }
    if (!valid) continue;
    bf16_t* dst;
    if (is_q) {
      dst = q_out + (int64_t(t0 + tt) * nh + head) * d;
    } else {
      const bool is_v = head >= nh + nkv;
      const int kvh = is_v ? head - nh - nkv : head - nh;
      dst = (is_v ? v_cache : k_cache) + kv_base[tt] + int64_t(kvh) * block_size * d;
      if (is_v) n = pack8(x);  // v as the decode kernel stores it
    }
    *reinterpret_cast<uint4*>(dst + 8 * m) = n;
  }
}

}  // namespace

std::vector<float> rope_inv_freq(float theta, int head_dim) {
  std::vector<float> f(size_t(head_dim / 2));
  for (int i = 0; i < head_dim / 2; ++i) f[size_t(i)] = float(std::pow(double(theta), -2.0 * i / head_dim));
  return f;
}

void qk_norm_rope_kv_write(const bf16* qkv, int T, const HeadShape& hs, const float* q_norm_w,
                           const float* k_norm_w, float eps, const int32_t* positions, const float* inv_freq,
                           const int64_t* slots, int block_size, bf16* k_cache, bf16* v_cache, bf16* q_out,
                           cudaStream_t stream) {
  if (T <= 0) return;
  const int64_t items = int64_t(T) * (hs.n_heads + 2 * hs.n_kv_heads);
  const unsigned grid = unsigned((items + kWarps - 1) / kWarps);
  const auto* in = reinterpret_cast<const bf16_t*>(qkv);
  auto* kc = reinterpret_cast<bf16_t*>(k_cache);
  auto* vc = reinterpret_cast<bf16_t*>(v_cache);
  auto* qo = reinterpret_cast<bf16_t*>(q_out);
  // The staged form takes steps above kPerHeadMaxTokens tokens whose rows fit its shared memory, with 16-byte
  // aligned buffers (cp.async, 16-byte stores); the per-(token, head) kernel everything else (the same bits).
  const size_t staged_smem = size_t(kTokensPerCta) * (hs.n_heads + 2 * hs.n_kv_heads) * hs.head_dim * 2;
  auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool per_token = T > kPerHeadMaxTokens && staged_smem <= kTokenMaxSmem && aligned16(qkv) && aligned16(q_out) &&
                         aligned16(k_cache) && aligned16(v_cache);
  const unsigned token_grid = unsigned((T + kTokensPerCta - 1) / kTokensPerCta);
#define STRIKER_QKR(E)                                                                                             \
  if (per_token)                                                                                                   \
    launch_pdl(qk_rope_kv_token_kernel<E>, dim3(token_grid), dim3(kTokenWarps * 32), staged_smem, stream, in, T,   \
               hs.n_heads, hs.n_kv_heads, q_norm_w, k_norm_w, eps, positions, inv_freq, slots, block_size, kc, vc, \
               qo);                                                                                                \
  else                                                                                                             \
    launch_pdl(qk_rope_kv_kernel<E>, dim3(grid), dim3(kWarps * 32), 0, stream, in, T, hs.n_heads, hs.n_kv_heads,   \
               q_norm_w, k_norm_w, eps, positions, inv_freq, slots, block_size, kc, vc, qo)
  switch (hs.head_dim) {
    case 32: STRIKER_QKR(1); break;
    case 64: STRIKER_QKR(2); break;
    case 128: STRIKER_QKR(4); break;
    default: throw Error("qk_norm_rope_kv_write: head_dim " + std::to_string(hs.head_dim) + " is not 32, 64 or 128");
  }
#undef STRIKER_QKR
  STRIKER_CUDA_CHECK_LAUNCH("qk_norm_rope_kv_write");
}

}  // namespace striker::cuda
