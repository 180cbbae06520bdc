#include "backends/cuda/moe.h"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/warp_dot.cuh"

namespace striker::cuda {
namespace {

constexpr int kWarps = 8;

// grid (row pairs, T*K): each warp computes gate and up of two rows of one (token, expert) slot.
__global__ void __launch_bounds__(kWarps * 32) moe_gate_up_kernel(const bf16_t* __restrict__ x, int hidden,
                                                                  const bf16_t* __restrict__ wg,
                                                                  const bf16_t* __restrict__ wu, int inter,
                                                                  const int32_t* __restrict__ ids, int K,
                                                                  bf16_t* __restrict__ act) {
  const int o0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * 2;
  if (o0 >= inter) return;
  const int slot = blockIdx.y, t = slot / K;
  const int64_t e = ids[slot];
  const int o1 = min(o0 + 1, inter - 1);
  const int64_t base = e * inter;
  const bf16_t* w[4] = {wg + (base + o0) * hidden, wu + (base + o0) * hidden, wg + (base + o1) * hidden,
                        wu + (base + o1) * hidden};
  const bf16_t* xt = x + int64_t(t) * hidden;
  const bf16_t* xr[4] = {xt, xt, xt, xt};
  float acc[4][1];
  warp_dot<4, 1>(w, xr, 0, 1, hidden, acc);
  const int lane = threadIdx.x & 31;
  if (lane < 2 && o0 + lane < inter) {
    const float g = round_bf16(lane == 0 ? acc[0][0] : acc[2][0]);
    const float u = round_bf16(lane == 0 ? acc[1][0] : acc[3][0]);
    act[int64_t(slot) * inter + o0 + lane] = __float2bfloat16_rn(silu_bf16(g) * u);
  }
}

// grid (row pairs, T): each warp produces two rows of the token's MoE output, looping over its K
// experts (fp32 weighted sum of bf16 expert outputs), then the shared expert and the residual.
__global__ void __launch_bounds__(kWarps * 32) moe_down_kernel(
    const bf16_t* __restrict__ act, int K, const bf16_t* __restrict__ wd, int inter, int hidden,
    const int32_t* __restrict__ ids, const float* __restrict__ topk_w, const bf16_t* __restrict__ shared_act,
    const bf16_t* __restrict__ wd_shared, int shared_inter, bf16_t* __restrict__ h) {
  const int o0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * 2;
  if (o0 >= hidden) return;
  const int t = blockIdx.y;
  const int o1 = min(o0 + 1, hidden - 1);
  float sum0 = 0.f, sum1 = 0.f;
  for (int k = 0; k < K; ++k) {
    const int slot = t * K + k;
    const int64_t base = int64_t(ids[slot]) * hidden;
    const bf16_t* w[2] = {wd + (base + o0) * inter, wd + (base + o1) * inter};
    const bf16_t* xa = act + int64_t(slot) * inter;
    const bf16_t* xr[2] = {xa, xa};
    float acc[2][1];
    warp_dot<2, 1>(w, xr, 0, 1, inter, acc);
    const float wk = topk_w[slot];
    sum0 = fmaf(wk, round_bf16(acc[0][0]), sum0);
    sum1 = fmaf(wk, round_bf16(acc[1][0]), sum1);
  }
  float y0 = round_bf16(sum0), y1 = round_bf16(sum1);
  if (shared_act != nullptr) {
    const bf16_t* w[2] = {wd_shared + int64_t(o0) * shared_inter, wd_shared + int64_t(o1) * shared_inter};
    const bf16_t* xs = shared_act + int64_t(t) * shared_inter;
    const bf16_t* xr[2] = {xs, xs};
    float acc[2][1];
    warp_dot<2, 1>(w, xr, 0, 1, shared_inter, acc);
    y0 = round_bf16(y0 + round_bf16(acc[0][0]));
    y1 = round_bf16(y1 + round_bf16(acc[1][0]));
  }
  const int lane = threadIdx.x & 31;
  if (lane < 2 && o0 + lane < hidden) {
    const int64_t idx = int64_t(t) * hidden + o0 + lane;
    h[idx] = __float2bfloat16_rn(__bfloat162float(h[idx]) + (lane == 0 ? y0 : y1));
  }
}

void check_width(const char* what, int width) {
  if (width <= 0 || width % 8 != 0)
    throw Error(std::string(what) + ": width " + std::to_string(width) + " is not a positive multiple of 8");
}

}  // namespace

void moe_gate_up(const bf16* x, int T, int hidden, const bf16* w_gate, const bf16* w_up, int inter,
                 const int32_t* topk_ids, int K, bf16* act, cudaStream_t stream) {
  if (T <= 0) return;
  check_width("moe_gate_up", hidden);
  const dim3 grid(unsigned((inter + 2 * kWarps - 1) / (2 * kWarps)), unsigned(T * K));
  moe_gate_up_kernel<<<grid, kWarps * 32, 0, stream>>>(
      reinterpret_cast<const bf16_t*>(x), hidden, reinterpret_cast<const bf16_t*>(w_gate),
      reinterpret_cast<const bf16_t*>(w_up), inter, topk_ids, K, reinterpret_cast<bf16_t*>(act));
  STRIKER_CUDA_CHECK_LAUNCH("moe_gate_up");
}

void moe_down_combine(const bf16* act, int T, int K, const bf16* w_down, int inter, int hidden,
                      const int32_t* topk_ids, const float* topk_w, const bf16* shared_act,
                      const bf16* w_down_shared, int shared_inter, bf16* h, cudaStream_t stream) {
  if (T <= 0) return;
  check_width("moe_down_combine", inter);
  if (shared_act) check_width("moe_down_combine (shared)", shared_inter);
  const dim3 grid(unsigned((hidden + 2 * kWarps - 1) / (2 * kWarps)), unsigned(T));
  moe_down_kernel<<<grid, kWarps * 32, 0, stream>>>(
      reinterpret_cast<const bf16_t*>(act), K, reinterpret_cast<const bf16_t*>(w_down), inter, hidden, topk_ids, topk_w,
      reinterpret_cast<const bf16_t*>(shared_act), reinterpret_cast<const bf16_t*>(w_down_shared), shared_inter,
      reinterpret_cast<bf16_t*>(h));
  STRIKER_CUDA_CHECK_LAUNCH("moe_down_combine");
}

}  // namespace striker::cuda
