#include "backends/cuda/router.h"

#include <algorithm>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/device_math.cuh"
#include "backends/cuda/norm_prologue.cuh"
#include "backends/cuda/warp_dot.cuh"

namespace striker::cuda {
namespace {

constexpr int kWarps = 2;  // small blocks: the 256 expert rows spread over 128 SMs
constexpr int kMaxExperts = 1024;
constexpr int kMaxTopK = 8;
constexpr int kTokensPerPass = 8;

constexpr int kRouterHead = 8;  // chunks per lane loaded before pdl_wait (early weights): all of a 2048-wide row

// acc[t] += x[t]·w over one 16-byte chunk c (8 weights already converted to float).
template <bool kSharedX>
__device__ __forceinline__ void router_chunk(const float (&wf)[8], const bf16_t* xsrc, int hidden, int nt, int c,
                                             float (&acc)[kTokensPerPass]) {
#pragma unroll
  for (int t = 0; t < kTokensPerPass; ++t)
    if (t < nt) {
      float xf[8];
      unpack8(load_x<kSharedX>(xsrc + int64_t(t) * hidden + c * 8), xf);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[t] = fmaf(xf[i], wf[i], acc[t]);
    }
}

__device__ __forceinline__ void f32_chunk(const float4& a, const float4& b, float (&wf)[8]) {
  wf[0] = a.x, wf[1] = a.y, wf[2] = a.z, wf[3] = a.w, wf[4] = b.x, wf[5] = b.y, wf[6] = b.z, wf[7] = b.w;
}

// Logits: one warp per expert, up to 8 tokens per pass over the expert's row, spread over
// E/8 blocks so the router matrix streams at full bandwidth.
// kEarly (DecodeTweaks::early_weights): the first kRouterHead chunks of the expert's row are loaded
// between launch_dependents and wait. kNorm (DecodeTweaks::fused_norm): x is h; each block computes
// x = rmsnorm(h, gamma) of its tokens into shared memory (norm_prologue.cuh: bit-identical to
// rmsnorm()), and the blocks of column 0 also write x to x_out for the MoE kernels. Those run two
// launches later (router_select, then gate/up): each passes griddepcontrol.wait only once its
// predecessor has completed, and router_select completed only after its own wait saw this grid
// complete and flush, so x_out is written and visible before any of them reads it. The
// accumulation order is the same in every variant.
template <bool kEarly, bool kNorm>
__global__ void __launch_bounds__(kWarps * 32) router_logits_kernel(const bf16_t* __restrict__ x, int T, int hidden,
                                                                    int E, const bf16_t* __restrict__ w_bf16,
                                                                    const float* __restrict__ w_f32,
                                                                    float* __restrict__ logits,
                                                                    const float* __restrict__ gamma, float eps,
                                                                    bf16_t* __restrict__ x_out) {
  const int e = blockIdx.x * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  const int t0 = blockIdx.y * kTokensPerPass;
  const int nt = min(kTokensPerPass, T - t0);
  const int chunks = hidden / 8;
  const float* wf32 = w_f32 != nullptr ? w_f32 + int64_t(min(e, E - 1)) * hidden : nullptr;
  const bf16_t* wb16 = w_f32 == nullptr ? w_bf16 + int64_t(min(e, E - 1)) * hidden : nullptr;
  float4 fhead[kRouterHead][2];
  uint4 bhead[kRouterHead];
  if constexpr (kEarly) {
    pdl_launch_dependents();
    if (e < E) {
#pragma unroll
      for (int p = 0; p < kRouterHead; ++p) {
        const int c = lane + p * 32;
        const bool live = c < chunks;
        if (wf32 != nullptr) {
          fhead[p][0] = live ? __ldcs(reinterpret_cast<const float4*>(wf32 + c * 8)) : make_float4(0, 0, 0, 0);
          fhead[p][1] = live ? __ldcs(reinterpret_cast<const float4*>(wf32 + c * 8 + 4)) : make_float4(0, 0, 0, 0);
        } else {
          bhead[p] = live ? load_stream(wb16 + c * 8) : make_uint4(0u, 0u, 0u, 0u);
        }
      }
    }
    pdl_wait();  // x / h is written by the previous kernels: read only after this
  } else {
    pdl_grid_start();  // see launch.cuh
  }
  const bf16_t* xsrc = x + int64_t(t0) * hidden;
  if constexpr (kNorm) {
    extern __shared__ uint4 router_smem[];  // [nt, hidden] bf16
    __shared__ float partial[kRmsVirtualWarps];
    bf16_t* xs = reinterpret_cast<bf16_t*>(router_smem);
    rms_norm_rows<kWarps * 32>(xsrc, gamma, eps, nt, hidden, xs,
                               blockIdx.x == 0 && x_out != nullptr ? x_out + int64_t(t0) * hidden : nullptr, partial);
    xsrc = xs;
  }
  if (e >= E) return;  // after the norm: its barriers need every thread
  float acc[kTokensPerPass];
#pragma unroll
  for (int t = 0; t < kTokensPerPass; ++t) acc[t] = 0.f;
  const int c_begin = lane + (kEarly ? kRouterHead * 32 : 0);
  if (wf32 != nullptr) {
    if constexpr (kEarly) {
#pragma unroll
      for (int p = 0; p < kRouterHead; ++p)
        if (lane + p * 32 < chunks) {
          float wf[8];
          f32_chunk(fhead[p][0], fhead[p][1], wf);
          router_chunk<kNorm>(wf, xsrc, hidden, nt, lane + p * 32, acc);
        }
    }
#pragma unroll 8  // all of a 2048-wide row's loads in flight at once
    for (int c = c_begin; c < chunks; c += 32) {
      const float4 a = __ldcs(reinterpret_cast<const float4*>(wf32 + c * 8));
      const float4 b = __ldcs(reinterpret_cast<const float4*>(wf32 + c * 8 + 4));
      float wf[8];
      f32_chunk(a, b, wf);
      router_chunk<kNorm>(wf, xsrc, hidden, nt, c, acc);
    }
  } else {
    if constexpr (kEarly) {
#pragma unroll
      for (int p = 0; p < kRouterHead; ++p)
        if (lane + p * 32 < chunks) {
          float wf[8];
          unpack8(bhead[p], wf);
          router_chunk<kNorm>(wf, xsrc, hidden, nt, lane + p * 32, acc);
        }
    }
#pragma unroll 8  // all of a 2048-wide row's loads in flight at once
    for (int c = c_begin; c < chunks; c += 32) {
      float wf[8];
      unpack8(load_stream(wb16 + c * 8), wf);
      router_chunk<kNorm>(wf, xsrc, hidden, nt, c, acc);
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
                 const float* bias, float* logits_scratch, int32_t* topk_ids, float* topk_w, cudaStream_t stream,
                 bool early_weights, const FusedRmsNorm* norm) {
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
  if (norm != nullptr && norm->gamma == nullptr) throw Error("router_topk: the fused norm needs its weights");
  const size_t smem = norm ? size_t(std::min(T, kTokensPerPass)) * size_t(rs.hidden) * sizeof(bf16_t) : 0;
  if (smem > 227 * 1024)
    throw Error("router_topk: hidden size " + std::to_string(rs.hidden) + " is too wide for the fused norm");
  auto go = [&](auto kernel) {
    if (smem > 48 * 1024)
      STRIKER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    launch_pdl(kernel, grid, dim3(kWarps * 32), smem, stream, reinterpret_cast<const bf16_t*>(x), T, rs.hidden,
               rs.n_experts, reinterpret_cast<const bf16_t*>(weight_bf16), weight_f32, logits_scratch,
               norm ? norm->gamma : nullptr, norm ? norm->eps : 0.f,
               norm ? reinterpret_cast<bf16_t*>(norm->x_out) : nullptr);
  };
  if (early_weights) norm ? go(router_logits_kernel<true, true>) : go(router_logits_kernel<true, false>);
  else norm ? go(router_logits_kernel<false, true>) : go(router_logits_kernel<false, false>);
  STRIKER_CUDA_CHECK_LAUNCH("router_logits");
  launch_pdl(router_select_kernel, dim3(T), dim3(32), 0, stream, logits_scratch, rs.n_experts, rs.top_k, bias, rs.norm_topk_prob,
                                             rs.routed_scaling_factor, topk_ids, topk_w);
  STRIKER_CUDA_CHECK_LAUNCH("router_topk");
}

}  // namespace striker::cuda
