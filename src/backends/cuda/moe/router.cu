// MoE router (FLINT.md §4), two forms:
// - decode steps (T <= 8): one launch spread over the GPU, one warp per expert row with its weight
//   row loaded into registers before griddepcontrol.wait (the router matrix does not depend on
//   earlier kernels, so its ~1 MiB streams while the o_proj kernel in front drains); the logits of
//   every token, then the top-K selection in the CTA that finishes last (common/last_block.cuh).
//   (It replaced an 8-CTA thread-block cluster per token that read the matrix on 8 SMs.)
// - larger steps: a logits kernel (one warp per expert, 8 tokens per pass), then a selection kernel.
// Both sum each lane's chunks c = lane, lane + 32, ... in order with the same fmaf, so a token's
// logits, ids and weights are the same bits in either form.
#include "backends/cuda/moe/router.h"

#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/last_block.cuh"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/moe/router_math.cuh"

namespace striker::cuda {
namespace {

constexpr int kWarps = 2;  // batched logits: small blocks, the 256 expert rows spread over 128 SMs
constexpr int kTokensPerPass = 8;

// One warp's dot products of expert row w with tokens t0 .. t0 + nt - 1 (nt <= kMaxT), lane-partial.
template <int kMaxT, typename W>
__device__ __forceinline__ void router_row_dot(const bf16_t* __restrict__ x, int t0, int nt, int hidden,
                                               const W* __restrict__ w, int lane, float (&acc)[kMaxT]) {
#pragma unroll
  for (int t = 0; t < kMaxT; ++t) acc[t] = 0.f;
#pragma unroll 8  // all of a 2048-wide row's loads in flight at once
  for (int c = lane; c < hidden / 8; c += 32) {
    float wf[8];
    RouterWeight<W>::unpack(RouterWeight<W>::load(w + c * 8), wf);
#pragma unroll
    for (int t = 0; t < kMaxT; ++t)
      if (t < nt) {
        float xf[8];
        unpack8(load_cached(x + int64_t(t0 + t) * hidden + c * 8), xf);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[t] = fmaf(xf[i], wf[i], acc[t]);
      }
  }
}

template <typename W>
__global__ void __launch_bounds__(kWarps * 32) router_logits_kernel(const bf16_t* __restrict__ x, int T, int hidden,
                                                                    int E, const W* __restrict__ weight,
                                                                    float* __restrict__ logits) {
  pdl_grid_start();  // see launch.cuh
  const int e = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (e >= E) return;
  const int lane = threadIdx.x & 31;
  const int t0 = blockIdx.y * kTokensPerPass;
  const int nt = min(kTokensPerPass, T - t0);
  float acc[kTokensPerPass];
  router_row_dot<kTokensPerPass>(x, t0, nt, hidden, weight + int64_t(e) * hidden, lane, acc);
#pragma unroll
  for (int t = 0; t < kTokensPerPass; ++t) {
    const float v = warp_sum(acc[t]);
    if (lane == 0 && t < nt) logits[int64_t(t0 + t) * E + e] = v;
  }
}

__global__ void __launch_bounds__(32) router_select_kernel(const float* __restrict__ logits, int E, int K,
                                                           const float* __restrict__ bias, bool norm, float rsf,
                                                           int32_t* __restrict__ ids, float* __restrict__ weights) {
  pdl_grid_start();  // see launch.cuh
  const int t = blockIdx.x;
  router_select([&](int e) { return logits[int64_t(t) * E + e]; }, t, E, K, bias, norm, rsf, ids, weights);
}

// ---- decode steps ----
constexpr int kDecodeWarps = 4;  // expert rows per CTA: 64 CTAs for 256 experts
constexpr int kHeld = 8;         // 16-byte weight chunks per lane held in registers (rows <= 2048)

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
  auto add_chunk = [&](const typename RouterWeight<W>::Chunk& q, int c) {
    float wf[8];
    RouterWeight<W>::unpack(q, wf);
#pragma unroll
    for (int t = 0; t < kRouterDecodeMaxTokens; ++t)
      if (t < T) {
        float xf[8];
        unpack8(load_cached(x + int64_t(t) * hidden + c * 8), xf);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[t] = fmaf(xf[j], wf[j], acc[t]);
      }
  };
#pragma unroll
  for (int i = 0; i < kHeld; ++i)  // held chunks first (constant indices: they stay in registers)
    if (lane + 32 * i < chunks) add_chunk(held[i], lane + 32 * i);
  for (int c = lane + 32 * kHeld; c < chunks; c += 32) add_chunk(RouterWeight<W>::load(w + c * kPer), c);
}

template <typename W>
__global__ void __launch_bounds__(kDecodeWarps * 32) router_decode_kernel(
    const bf16_t* __restrict__ x, int T, int hidden, int E, int K, const W* __restrict__ weight,
    const float* __restrict__ bias, bool norm, float rsf, float* __restrict__ logits, unsigned int* counter,
    int32_t* __restrict__ ids, float* __restrict__ weights) {
  pdl_launch_dependents();
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int e = int(blockIdx.x) * kDecodeWarps + warp;
  float acc[kRouterDecodeMaxTokens];
  row_dots<W>(weight + int64_t(min(e, E - 1)) * hidden, x, T, hidden, lane, acc);  // waits inside
#pragma unroll
  for (int t = 0; t < kRouterDecodeMaxTokens; ++t) {
    const float v = warp_sum(acc[t]);
    if (lane == 0 && t < T && e < E) logits[int64_t(t) * E + e] = v;
  }
  if (!last_block_arrive(counter, gridDim.x)) return;
  for (int t = warp; t < T; t += kDecodeWarps)
    router_select([&](int ex) { return __ldcg(logits + int64_t(t) * E + ex); }, t, E, K, bias, norm, rsf, ids,
                       weights);
}


template <typename W>
void launch_router(const bf16* x, int T, const RouterShape& rs, const W* weight, const float* bias, float* logits,
                   unsigned int* counter, int32_t* ids, float* topk_w, cudaStream_t stream) {
  const auto* xb = reinterpret_cast<const bf16_t*>(x);
  if (T <= kRouterDecodeMaxTokens) {
    launch_pdl(router_decode_kernel<W>, dim3(unsigned((rs.n_experts + kDecodeWarps - 1) / kDecodeWarps)),
               dim3(kDecodeWarps * 32), 0, stream, xb, T, rs.hidden, rs.n_experts, rs.top_k, weight, bias,
               rs.norm_topk_prob, rs.routed_scaling_factor, logits, counter, ids, topk_w);
    STRIKER_CUDA_CHECK_LAUNCH("router_decode");
    return;
  }
  const dim3 grid(unsigned((rs.n_experts + kWarps - 1) / kWarps), unsigned((T + kTokensPerPass - 1) / kTokensPerPass));
  launch_pdl(router_logits_kernel<W>, grid, dim3(kWarps * 32), 0, stream, xb, T, rs.hidden, rs.n_experts, weight,
             logits);
  STRIKER_CUDA_CHECK_LAUNCH("router_logits");
  launch_pdl(router_select_kernel, dim3(T), dim3(32), 0, stream, logits, rs.n_experts, rs.top_k, bias,
             rs.norm_topk_prob, rs.routed_scaling_factor, ids, topk_w);
  STRIKER_CUDA_CHECK_LAUNCH("router_select");
}

}  // namespace

void router_topk(const bf16* x, int T, const RouterShape& rs, const bf16* weight_bf16, const float* weight_f32,
                 const float* bias, float* logits_scratch, unsigned int* counter, int32_t* topk_ids, float* topk_w,
                 cudaStream_t stream) {
  if (T <= 0) return;
  if (rs.n_experts <= 0 || rs.n_experts > kRouterMaxExperts || rs.top_k <= 0 || rs.top_k > kRouterMaxTopK ||
      rs.top_k > rs.n_experts)
    throw Error("router_topk: unsupported experts/top-k " + std::to_string(rs.n_experts) + "/" +
                std::to_string(rs.top_k) + " (at most 1024 experts and top-8)");
  if ((weight_bf16 == nullptr) == (weight_f32 == nullptr))
    throw Error("router_topk: exactly one of the bf16 / fp32 router weights must be given");
  if (rs.hidden % 8 != 0 || logits_scratch == nullptr)
    throw Error("router_topk: hidden size must be a multiple of 8 and a logits scratch [T, E] is required");
  if (T <= kRouterDecodeMaxTokens && counter == nullptr)
    throw Error("router_topk: a decode step (T <= 8) needs a zero-initialised device counter");
  if (weight_f32 != nullptr)
    launch_router(x, T, rs, weight_f32, bias, logits_scratch, counter, topk_ids, topk_w, stream);
  else
    launch_router(x, T, rs, reinterpret_cast<const bf16_t*>(weight_bf16), bias, logits_scratch, counter, topk_ids,
                  topk_w, stream);
}

}  // namespace striker::cuda
