#include "backends/cuda/moe/router.h"

#include <cooperative_groups.h>

#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/device_math.cuh"

namespace striker::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = 2;  // small blocks: the 256 expert rows spread over 128 SMs
constexpr int kMaxExperts = 1024;
constexpr int kMaxTopK = 8;
constexpr int kTokensPerPass = 8;

// One warp's dot products of expert row e with tokens t0 .. t0 + nt - 1 (nt <= kMaxT), each lane
// summing its 8-wide chunks c = lane, lane + 32, ... in order; the caller reduces acc across the
// warp. Both logits kernels call it, so a token's fp32 logit is the same bits in either.
template <int kMaxT>
__device__ __forceinline__ void router_row_dot(const bf16_t* __restrict__ x, int t0, int nt, int hidden, int e,
                                               const bf16_t* __restrict__ w_bf16, const float* __restrict__ w_f32,
                                               int lane, float (&acc)[kMaxT]) {
#pragma unroll
  for (int t = 0; t < kMaxT; ++t) acc[t] = 0.f;
  if (w_f32 != nullptr) {
    const float* w = w_f32 + int64_t(e) * hidden;
#pragma unroll 8  // all of a 2048-wide row's loads in flight at once
    for (int c = lane; c < hidden / 8; c += 32) {
      const float4 a = __ldcs(reinterpret_cast<const float4*>(w + c * 8));
      const float4 b = __ldcs(reinterpret_cast<const float4*>(w + c * 8 + 4));
      const float wf[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
      for (int t = 0; t < kMaxT; ++t)
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
      for (int t = 0; t < kMaxT; ++t)
        if (t < nt) {
          float xf[8];
          unpack8(load_cached(x + int64_t(t0 + t) * hidden + c * 8), xf);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[t] = fmaf(xf[i], wf[i], acc[t]);
        }
    }
  }
}

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
  router_row_dot<kTokensPerPass>(x, t0, nt, hidden, e, w_bf16, w_f32, lane, acc);
#pragma unroll
  for (int t = 0; t < kTokensPerPass; ++t) {
    const float v = warp_sum(acc[t]);
    if (lane == 0 && t < nt) logits[int64_t(t0 + t) * E + e] = v;
  }
}

// Selection of token t by one warp: the top K of sigmoid(logit) + bias in K rounds of a warp-wide
// argmax (ties go to the lower index, as the spec requires). logit_of(e) gives the fp32 logit;
// score and sel are E-float shared arrays of the calling warp.
template <typename LogitOf>
__device__ __forceinline__ void router_select_warp(LogitOf logit_of, int t, int E, int K,
                                                   const float* __restrict__ bias, bool norm, float rsf,
                                                   float* score, float* sel, int32_t* __restrict__ ids,
                                                   float* __restrict__ weights) {
  const int lane = threadIdx.x & 31;
  for (int e = lane; e < E; e += 32) {
    const float s = 1.0f / (1.0f + expf(-logit_of(e)));
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

__global__ void __launch_bounds__(32) router_select_kernel(const float* __restrict__ logits, int E, int K,
                                                           const float* __restrict__ bias, bool norm, float rsf,
                                                           int32_t* __restrict__ ids, float* __restrict__ weights) {
  pdl_grid_start();  // see launch.cuh
  __shared__ float score[kMaxExperts];
  __shared__ float sel[kMaxExperts];
  const int t = blockIdx.x;
  router_select_warp([&](int e) { return logits[int64_t(t) * E + e]; }, t, E, K, bias, norm, rsf, score, sel, ids,
                     weights);
}

// ---- One-launch router (decode, T <= kClusterMaxTokens) ----
// A cluster of kClusterCtas CTAs per token: CTA r computes the logits of experts
// [r·per, (r+1)·per) with router_row_dot (one token, so the same bits as router_logits_kernel) and
// stores each into CTA 0's shared logit array through DSMEM; after the cluster barrier CTA 0's
// first warp runs router_select_warp on it. One cluster per token rather than one cluster for all
// tokens: the weight slice then comes from L2 for the 2nd..Tth token, and each CTA does one token's
// FMAs instead of T tokens' (8 tokens × 32 rows × 2048 would be ~2 µs of FMA issue on one SM).
constexpr int kClusterCtas = 8;   // portable cluster size
constexpr int kClusterWarps = 16;  // 16 rows' loads in flight per SM
constexpr int kClusterMaxTokens = 8;
constexpr int kL2Line = 128;

__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// grid (T · kClusterCtas), cluster (kClusterCtas): blockIdx.x / kClusterCtas is the token,
// the cluster rank the expert slice.
__global__ void __launch_bounds__(kClusterWarps * 32) router_cluster_kernel(
    const bf16_t* __restrict__ x, int hidden, int E, int K, const bf16_t* __restrict__ w_bf16,
    const float* __restrict__ w_f32, const float* __restrict__ bias, bool norm, float rsf,
    float* __restrict__ logits, int32_t* __restrict__ ids, float* __restrict__ weights) {
  pdl_launch_dependents();
  // Relaxed arrive now, wait before the first DSMEM store: no CTA writes into CTA 0's shared
  // memory before CTA 0 has started (CUDA requires every CTA of the cluster to be running).
  asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
  __shared__ float all_logits[kMaxExperts];  // used in rank 0 only: every CTA stores into rank 0's
  __shared__ float score[kMaxExperts];
  __shared__ float sel[kMaxExperts];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = int(cluster.block_rank());
  const int t = int(blockIdx.x) / kClusterCtas;
  const int per = (E + kClusterCtas - 1) / kClusterCtas;
  const int e_begin = min(E, rank * per), e_end = min(E, e_begin + per);
  // The slice's weights do not depend on earlier kernels: start them towards L2 before the wait.
  const size_t slice_bytes = size_t(e_end - e_begin) * size_t(hidden) * (w_f32 ? sizeof(float) : sizeof(bf16_t));
  const char* slice = w_f32 ? reinterpret_cast<const char*>(w_f32 + int64_t(e_begin) * hidden)
                            : reinterpret_cast<const char*>(w_bf16 + int64_t(e_begin) * hidden);
  for (size_t off = size_t(threadIdx.x) * kL2Line; off < slice_bytes; off += size_t(blockDim.x) * kL2Line)
    prefetch_l2(slice + off);
  pdl_wait();  // x is the previous kernel's output
  asm volatile("barrier.cluster.wait;" ::: "memory");
  float* rank0_logits = cluster.map_shared_rank(&all_logits[0], 0u);
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  for (int e = e_begin + warp; e < e_end; e += kClusterWarps) {
    float acc[1];
    router_row_dot<1>(x, t, 1, hidden, e, w_bf16, w_f32, lane, acc);
    const float v = warp_sum(acc[0]);
    if (lane == 0) {
      rank0_logits[e] = v;
      logits[int64_t(t) * E + e] = v;  // logits_scratch, as the two-launch path leaves it
    }
  }
  cluster.sync();  // release/acquire: every CTA's DSMEM stores are visible in rank 0
  // Nothing reads another CTA's shared memory after the barrier, so ranks 1.. may exit now.
  if (rank == 0 && warp == 0)
    router_select_warp([&](int e) { return all_logits[e]; }, t, E, K, bias, norm, rsf, score, sel, ids, weights);
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
  if (T <= kClusterMaxTokens) {
    launch_pdl_cluster(router_cluster_kernel, dim3(unsigned(T * kClusterCtas)), dim3(kClusterWarps * 32), 0,
                       kClusterCtas, stream, reinterpret_cast<const bf16_t*>(x), rs.hidden, rs.n_experts, rs.top_k,
                       reinterpret_cast<const bf16_t*>(weight_bf16), weight_f32, bias, rs.norm_topk_prob,
                       rs.routed_scaling_factor, logits_scratch, topk_ids, topk_w);
    STRIKER_CUDA_CHECK_LAUNCH("router_cluster");
    return;
  }
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
