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

using front::finish;
using front::lane_to_float;
using front::LaneVec;
using front::prepare;
using front::Prep;

constexpr int kWarps = 4;

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

// Steps of more than kDecodeMaxTokens tokens: kTokensPerCta tokens per CTA. Their q|k|v rows (one
// contiguous range) are staged into shared memory with cp.async, all issued at once, so the bytes
// in flight do not depend on registers (the first form, one token per CTA loading through
// registers, ran 4 CTAs per SM at 56 registers: 88 µs at 8192 tokens, 0.42 of the bandwidth); then
// the warps take (token, head) items from there. Each token's RoPE cos/sin are computed once into
// shared memory (d/2 double sincos) instead of once per head and lane as the decode kernel does
// (36 q/k heads x 2 lanes per frequency); each value is the same expression as prepare()'s, and
// finish() is the decode kernel's, so the bits are the same.
constexpr int kDecodeMaxTokens = 8;
constexpr int kTokenWarps = 8, kTokensPerCta = 2;
constexpr size_t kTokenMaxSmem = 40 * 1024;  // dynamic shared memory: Flint's 2 × 40 heads × 128 = 20 KiB

template <int E>
__global__ void __launch_bounds__(kTokenWarps * 32) qk_rope_kv_token_kernel(
    const bf16_t* __restrict__ qkv, int T, int nh, int nkv, const float* __restrict__ q_norm_w,
    const float* __restrict__ k_norm_w, float eps, const int32_t* __restrict__ positions,
    const float* __restrict__ inv_freq, const int64_t* __restrict__ slots, int block_size,
    bf16_t* __restrict__ k_cache, bf16_t* __restrict__ v_cache, bf16_t* __restrict__ q_out) {
  extern __shared__ __align__(16) unsigned char smem[];
  pdl_launch_dependents();  // see launch.cuh
  constexpr int d = 32 * E;
  __shared__ float cs_s[kTokensPerCta][d / 2], sn_s[kTokensPerCta][d / 2];
  const int t0 = int(blockIdx.x) * kTokensPerCta, nt = min(kTokensPerCta, T - t0), heads = nh + 2 * nkv;
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  // Before the wait, as in the decode kernel: weights and positions only.
  if (inv_freq != nullptr)
    for (int k = int(threadIdx.x); k < nt * (d / 2); k += kTokenWarps * 32) {
      const int tt = k / (d / 2), i = k % (d / 2);
      const float phi = __fmul_rn(float(positions[t0 + tt]), inv_freq[i]);
      double sd, cd;
      sincos(double(phi), &sd, &cd);  // double keeps cos/sin accurate for φ up to ~2.6e5
      cs_s[tt][i] = round_bf16(float(cd));
      sn_s[tt][i] = round_bf16(float(sd));
    }
  pdl_wait();  // qkv comes from the GEMM in front
  const int64_t row = int64_t(heads) * d;
  auto* rows = reinterpret_cast<bf16_t*>(smem);
  const bf16_t* src = qkv + int64_t(t0) * row;
  for (int c = int(threadIdx.x); c < nt * row / 8; c += kTokenWarps * 32) cp_async16(rows + c * 8, src + c * 8, true);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  for (int item = warp; item < nt * heads; item += kTokenWarps) {
    const int tt = item / heads, head = item % heads;
    Prep<E> pr;
    const float* gamma = head < nh ? q_norm_w : k_norm_w;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      pr.gamma[e] = head < nh + nkv ? gamma[lane * E + e] : 0.f;
      const int i = (lane & 15) * E + e;  // frequency index < d/2
      pr.cs[e] = inv_freq != nullptr ? cs_s[tt][i] : 0.f;
      pr.sn[e] = inv_freq != nullptr ? sn_s[tt][i] : 0.f;
    }
    float x[E];
    lane_to_float<E>(*reinterpret_cast<const typename LaneVec<E>::T*>(rows + tt * row + int64_t(head) * d + lane * E),
                     x);
    finish<E>(x, pr, t0 + tt, head, nh, nkv, eps, inv_freq, slots, block_size, k_cache, v_cache, q_out);
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
  // The staged form takes steps above 8 tokens whose rows fit its shared memory and start 16-byte
  // aligned (cp.async); the per-(token, head) kernel everything else (the same bits).
  const size_t staged_smem = size_t(kTokensPerCta) * (hs.n_heads + 2 * hs.n_kv_heads) * hs.head_dim * 2;
  const bool per_token = T > kDecodeMaxTokens && staged_smem <= kTokenMaxSmem &&
                         reinterpret_cast<uintptr_t>(qkv) % 16 == 0;
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
