#include "backends/cuda/router.h"

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_math.cuh"

namespace striker::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxExperts = 1024;
constexpr int kMaxTopK = 8;

// One block per token: warps compute the E logits, then warp 0 picks the top K in K rounds of
// a warp-wide argmax (ties go to the lower index, as the spec requires).
__global__ void __launch_bounds__(kWarps * 32) router_kernel(const bf16_t* __restrict__ x, int hidden, int E, int K,
                                                             const bf16_t* __restrict__ w_bf16,
                                                             const float* __restrict__ w_f32,
                                                             const float* __restrict__ bias, bool norm, float rsf,
                                                             int32_t* __restrict__ ids, float* __restrict__ weights) {
  __shared__ float score[kMaxExperts];
  __shared__ float sel[kMaxExperts];
  const int t = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const bf16_t* xt = x + int64_t(t) * hidden;
  for (int e = warp; e < E; e += kWarps) {
    float acc = 0.f;
    if (w_f32 != nullptr) {
      const float* w = w_f32 + int64_t(e) * hidden;
      for (int i = lane; i < hidden; i += 32) acc = fmaf(__bfloat162float(xt[i]), w[i], acc);
    } else {
      const bf16_t* w = w_bf16 + int64_t(e) * hidden;
      for (int i = lane; i < hidden; i += 32) acc = fmaf(__bfloat162float(xt[i]), __bfloat162float(w[i]), acc);
    }
    acc = warp_sum(acc);
    if (lane == 0) {
      const float s = 1.0f / (1.0f + expf(-acc));
      score[e] = s;
      sel[e] = s + (bias ? bias[e] : 0.f);
    }
  }
  __syncthreads();
  if (warp != 0) return;
  float picked_sum = 0.f;
  int picked[kMaxTopK];
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
    picked[k] = best_e;
    picked_sum += score[best_e];
    __syncwarp();
    if (lane == 0) sel[best_e] = -__builtin_huge_valf();
    __syncwarp();
  }
  if (lane < K) {
    int e = picked[0];
#pragma unroll
    for (int k = 1; k < kMaxTopK; ++k)
      if (k == lane) e = picked[k];
    const float s = score[e];
    ids[t * K + lane] = e;
    weights[t * K + lane] = (norm ? s / (picked_sum + 1e-20f) : s) * rsf;
  }
}

}  // namespace

void router_topk(const bf16* x, int T, const RouterShape& rs, const bf16* weight_bf16, const float* weight_f32,
                 const float* bias, int32_t* topk_ids, float* topk_w, cudaStream_t stream) {
  if (T <= 0) return;
  if (rs.n_experts <= 0 || rs.n_experts > kMaxExperts || rs.top_k <= 0 || rs.top_k > kMaxTopK ||
      rs.top_k > rs.n_experts)
    throw Error("router_topk: unsupported experts/top-k " + std::to_string(rs.n_experts) + "/" +
                std::to_string(rs.top_k) + " (at most 1024 experts and top-8)");
  if ((weight_bf16 == nullptr) == (weight_f32 == nullptr))
    throw Error("router_topk: exactly one of the bf16 / fp32 router weights must be given");
  router_kernel<<<T, kWarps * 32, 0, stream>>>(reinterpret_cast<const bf16_t*>(x), rs.hidden, rs.n_experts, rs.top_k,
                                               reinterpret_cast<const bf16_t*>(weight_bf16), weight_f32, bias,
                                               rs.norm_topk_prob, rs.routed_scaling_factor, topk_ids, topk_w);
  STRIKER_CUDA_CHECK_LAUNCH("router_topk");
}

}  // namespace striker::cuda
