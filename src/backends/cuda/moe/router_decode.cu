// The router of a decode step (T <= 8 tokens) in one launch spread over the whole GPU: one warp per
// expert row, its weight row loaded into registers before griddepcontrol.wait (the router matrix
// does not depend on earlier kernels, so its ~1 MiB streams while the o_proj kernel in front
// drains), then the logits of every token, and the top-K selection in the CTA that finishes last
// (common/last_block.cuh). Replaces an 8-CTA cluster per token that read the matrix on 8 SMs.
#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/last_block.cuh"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/moe/router.h"
#include "backends/cuda/moe/router_math.cuh"

namespace striker::cuda {
namespace {

constexpr int kWarps = 4;     // expert rows per CTA: 64 CTAs for 256 experts
constexpr int kHeld = 8;      // 16-byte weight chunks per lane held in registers (bf16 rows <= 2048)

// One warp's fp32 dot products of its expert row with tokens 0..T-1, lane-partial over chunks
// c = lane, lane + 32, ... in order (the summation order of router_row_dot, so the logits are the
// same bits as the batched router's).
template <typename W>
__device__ __forceinline__ void row_dots(const W* __restrict__ w, const bf16_t* __restrict__ x, int T, int hidden,
                                         int lane, float (&acc)[kRouterDecodeMaxTokens]) {
  constexpr int kPer = RouterWeight<W>::kValuesPerChunk;  // 8 values = 16 bytes (bf16) or 32 bytes (fp32)
  const int chunks = hidden / 8;
  typename RouterWeight<W>::Chunk held[kHeld];
#pragma unroll
  for (int i = 0; i < kHeld; ++i)
    if (lane + 32 * i < chunks) held[i] = RouterWeight<W>::load(w + (lane + 32 * i) * kPer);
  pdl_wait();  // x is the previous kernel's output
#pragma unroll
  for (int t = 0; t < kRouterDecodeMaxTokens; ++t) acc[t] = 0.f;
  for (int c = lane, i = 0; c < chunks; c += 32, ++i) {
    float wf[8];
    RouterWeight<W>::unpack(i < kHeld ? held[i] : RouterWeight<W>::load(w + c * kPer), wf);
#pragma unroll
    for (int t = 0; t < kRouterDecodeMaxTokens; ++t)
      if (t < T) {
        float xf[8];
        unpack8(load_cached(x + int64_t(t) * hidden + c * 8), xf);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[t] = fmaf(xf[j], wf[j], acc[t]);
      }
  }
}

template <typename W>
__global__ void __launch_bounds__(kWarps * 32) router_decode_kernel(
    const bf16_t* __restrict__ x, int T, int hidden, int E, int K, const W* __restrict__ weight,
    const float* __restrict__ bias, bool norm, float rsf, float* __restrict__ logits, unsigned int* counter,
    int32_t* __restrict__ ids, float* __restrict__ weights) {
  pdl_launch_dependents();
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int e = int(blockIdx.x) * kWarps + warp;
  float acc[kRouterDecodeMaxTokens];
  row_dots<W>(weight + int64_t(min(e, E - 1)) * hidden, x, T, hidden, lane, acc);  // waits inside
#pragma unroll
  for (int t = 0; t < kRouterDecodeMaxTokens; ++t) {
    const float v = warp_sum(acc[t]);
    if (lane == 0 && t < T && e < E) logits[int64_t(t) * E + e] = v;
  }
  if (!last_block_arrive(counter, gridDim.x)) return;
  __shared__ float score[kWarps][kRouterMaxExperts];
  __shared__ float sel[kWarps][kRouterMaxExperts];
  for (int t = warp; t < T; t += kWarps)
    router_select_warp([&](int ex) { return __ldcg(logits + int64_t(t) * E + ex); }, t, E, K, bias, norm, rsf,
                       score[warp], sel[warp], ids, weights);
}

}  // namespace

void router_topk_decode(const bf16* x, int T, const RouterShape& rs, const bf16* weight_bf16, const float* weight_f32,
                        const float* bias, float* logits_scratch, unsigned int* counter, int32_t* topk_ids,
                        float* topk_w, cudaStream_t stream) {
  if (T <= 0) return;
  check_router_shape("router_topk_decode", rs, weight_bf16, weight_f32, logits_scratch);
  if (T > kRouterDecodeMaxTokens || counter == nullptr)
    throw Error("router_topk_decode: " + std::to_string(T) + " tokens (at most " +
                std::to_string(kRouterDecodeMaxTokens) + ") or no counter");
  const dim3 grid(unsigned((rs.n_experts + kWarps - 1) / kWarps));
  const auto* xb = reinterpret_cast<const bf16_t*>(x);
  if (weight_f32 != nullptr)
    launch_pdl(router_decode_kernel<float>, grid, dim3(kWarps * 32), 0, stream, xb, T, rs.hidden, rs.n_experts,
               rs.top_k, weight_f32, bias, rs.norm_topk_prob, rs.routed_scaling_factor, logits_scratch, counter,
               topk_ids, topk_w);
  else
    launch_pdl(router_decode_kernel<bf16_t>, grid, dim3(kWarps * 32), 0, stream, xb, T, rs.hidden, rs.n_experts,
               rs.top_k, reinterpret_cast<const bf16_t*>(weight_bf16), bias, rs.norm_topk_prob,
               rs.routed_scaling_factor, logits_scratch, counter, topk_ids, topk_w);
  STRIKER_CUDA_CHECK_LAUNCH("router_topk_decode");
}

}  // namespace striker::cuda
