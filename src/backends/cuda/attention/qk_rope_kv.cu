#include "backends/cuda/attention/qk_rope_kv.h"

#include <cmath>
#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/attention/qk_rope_head.cuh"

namespace striker::cuda {
namespace {

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
#define STRIKER_QKR(E)                                                                                             \
  launch_pdl(qk_rope_kv_kernel<E>, dim3(grid), dim3(kWarps * 32), 0, stream, in,                                   \
              T, hs.n_heads, hs.n_kv_heads, q_norm_w, k_norm_w, eps, positions, inv_freq, slots,       \
             block_size, kc, vc, qo)
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
