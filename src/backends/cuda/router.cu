#include "backends/cuda/router.h"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/device_math.cuh"

namespace striker::cuda {
namespace {

constexpr int kWarps = 2;  // small blocks: the 256 expert rows spread over 128 SMs
constexpr int kMaxExperts = 1024;
constexpr int kMaxTopK = 8;
constexpr int kTokensPerPass = 8;

// Logits: one warp per expert, up to 8 tokens per pass over the expert's row, spread over
// E/8 blocks so the router matrix streams at full bandwidth.
__global__ void __launch_bounds__(kWarps * 32) router_logits_kernel(const bf16_t* __restrict__ x, int T, int hidden,
                                                                    int E, const bf16_t* __restrict__ w_bf16,
                                                                    const float* __restrict__ w_f32,
                                                                    float* __restrict__ logits) {
  pdl_grid_start();  // see launch.cuh
  const int e = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (e >= E) return;
  const int lane = threadIdx.x & 31;
  const int t0 = blockIdx.y * kTokensPerPass;
  const int nt = min(kTokensPerPass, T - t0);
  float acc[kTokensPerPass];
#pragma unroll
  for (int t = 0; t < kTokensPerPass; ++t) acc[t] = 0.f;
  if (w_f32 != nullptr) {
    const float* w = w_f32 + int64_t(e) * hidden;
#pragma unroll 8  // all of a 2048-wide row's loads in flight at once
    for (int c = lane; c < hidden / 8; c += 32) {
      const float4 a = __ldcs(reinterpret_cast<const float4*>(w + c * 8));
      const float4 b = __ldcs(reinterpret_cast<const float4*>(w + c * 8 + 4));
      const float wf[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int t = 0; t < kTokensPerPass; ++t)
        if (t < nt) {
          float xf[8];
          unpack8(load_cached(x + int64_t(t0 + t) * hidden + c * 8), xf);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[t] = fmaf(xf[i], wf[i], acc[t]);
        }
    }
  } else {
    const bf16_t* w = w_bf16 + int64_t(e) * hidden;
#pragma unroll 8  // all of a 2048-wide row's loads in flight at once
    for (int c = lane; c < hidden / 8; c += 32) {
      float wf[8];
      unpack8(load_stream(w + c * 8), wf);
#pragma unroll
      for (int t = 0; t < kTokensPerPass; ++t)
        if (t < nt) {
          float xf[8];
          unpack8(load_cached(x + int64_t(t0 + t) * hidden + c * 8), xf);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[t] = fmaf(xf[i], wf[i], acc[t]);
        }
    }
  }
#pragma unroll
  for (int t = 0; t < kTokensPerPass; ++t) {
    const float v = warp_sum(acc[t]);
    if (lane == 0 && t < nt) logits[int64_t(t0 + t) * E + e] = v;
  }
}

// Selection: one warp per token picks the top K of sigmoid(logit) + bias in K rounds of a
// warp-wide argmax (ties go to the lower index, as the spec requires).
__global__ void __launch_bounds__(32) router_select_kernel(const float* __restrict__ logits, int E, int K,
                                                           const float* __restrict__ bias, bool norm, float rsf,
                                                           int32_t* __restrict__ ids, float* __restrict__ weights) {
  pdl_grid_start();  // see launch.cuh
  __shared__ float score[kMaxExperts];
  __shared__ float sel[kMaxExperts];
  const int t = blockIdx.x, lane = threadIdx.x;
  for (int e = lane; e < E; e += 32) {
    const float s = 1.0f / (1.0f + expf(-logits[int64_t(t) * E + e]));
    score[e] = s;
    sel[e] = s + (bias ? bias[e] : 0.f);
  }
  __syncwarp();
  float picked_sum = 0.f;
  int mine = 0;  // lane k keeps the k-th pick
  for (int k = 0; k < K; ++k) {
    float best = -__builtin_huge_valf();
    int best_e = E;
    for (int e = lane; e < E; e += 32)
      if (sel[e] > best) {  // strict: within a lane the lower index wins ties
        best = sel[e];
        best_e = e;
      }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oe = __shfl_xor_sync(0xffffffffu, best_e, o);
      if (ob > best || (ob == best && oe < best_e)) {
        best = ob;
        best_e = oe;
      }
    }
    // Only NaN scores leave best_e == E; keep the index in range (the NaN weights still show).
    best_e = min(best_e, E - 1);
    if (lane == k) mine = best_e;
    picked_sum += score[best_e];
    __syncwarp();
    if (lane == 0) sel[best_e] = -__builtin_huge_valf();
    __syncwarp();
  }
  if (lane < K) {
    const float s = score[mine];
    ids[t * K + lane] = mine;
    weights[t * K + lane] = (norm ? s / (picked_sum + 1e-20f) : s) * rsf;
  }
}

}  // namespace

void router_topk(const bf16* x, int T, const RouterShape& rs, const bf16* weight_bf16, const float* weight_f32,
                 const float* bias, float* logits_scratch, int32_t* topk_ids, float* topk_w, cudaStream_t stream) {
  if (T <= 0) return;
  if (rs.n_experts <= 0 || rs.n_experts > kMaxExperts || rs.top_k <= 0 || rs.top_k > kMaxTopK ||
      rs.top_k > rs.n_experts)
    throw Error("router_topk: unsupported experts/top-k " + std::to_string(rs.n_experts) + "/" +
                std::to_string(rs.top_k) + " (at most 1024 experts and top-8)");
  if ((weight_bf16 == nullptr) == (weight_f32 == nullptr))
    throw Error("router_topk: exactly one of the bf16 / fp32 router weights must be given");
  if (rs.hidden % 8 != 0 || logits_scratch == nullptr)
    throw Error("router_topk: hidden size must be a multiple of 8 and a logits scratch [T, E] is required");
  const dim3 grid(unsigned((rs.n_experts + kWarps - 1) / kWarps), unsigned((T + kTokensPerPass - 1) / kTokensPerPass));
  launch_pdl(router_logits_kernel, dim3(grid), dim3(kWarps * 32), 0, stream, reinterpret_cast<const bf16_t*>(x), T, rs.hidden,
                                                         rs.n_experts, reinterpret_cast<const bf16_t*>(weight_bf16),
                                                         weight_f32, logits_scratch);
  STRIKER_CUDA_CHECK_LAUNCH("router_logits");
  launch_pdl(router_select_kernel, dim3(T), dim3(32), 0, stream, logits_scratch, rs.n_experts, rs.top_k, bias, rs.norm_topk_prob,
                                             rs.routed_scaling_factor, topk_ids, topk_w);
  STRIKER_CUDA_CHECK_LAUNCH("router_topk");
}

}  // namespace striker::cuda
