// MoE router (FLINT.md §4), two forms; the CUDA-core ones share one per-lane chunk order and fmaf
// chain, so a token's logits, ids and weights are the same bits in each (the bf16 router's batched
// logits come from cuBLASLt instead: router.h):
// - decode steps (T <= 8): one launch spread over the GPU (router_spread_kernel): each CTA holds two
//   expert rows in registers (requested before griddepcontrol.wait) for every token of the step,
//   normalises the tokens' h itself, and the logits meet in CTA t through flagged 64-bit words in
//   global memory (no cluster, fence, atomic or counter), whose 8 warps select token t's top K.
// - larger steps: the logits — a cuBLASLt tensor-core GEMM with fp32 output for a bf16 router
//   (router.h says why its bits may differ from the decode form's), a CUDA-core kernel (register
//   blocks of 8 experts × 8 tokens per warp, the decode form's bits) for an fp32 one — then a
//   selection kernel.
#include "backends/cuda/moe/router.h"

#include <algorithm>
#include <string>
#include <type_traits>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/stamps.cuh"
#include "backends/cuda/elementwise/rmsnorm.h"
#include "backends/cuda/elementwise/rmsnorm_row.cuh"
#include "backends/cuda/linear/gemm_lt.h"
#include "backends/cuda/moe/router_math.cuh"

namespace striker::cuda {
namespace {

// Every CUDA-core form computes a (token, expert) logit in one order, "the router's lane order": lane l of
// a warp accumulates chunks c = l, l + 32, ... of 8 values (fmaf over the 8 in order, x times w),
// then warp_sum adds the lanes. So a token's logits are the same bits in each form.

// Batched logits of an fp32 router (steps above 8 tokens): a CTA covers kTileE experts × kTileT tokens, each warp an
// 8 × 8 block of them, every (expert, token) dot product accumulated by its lanes in exactly the
// router's lane order, so a token's logits are the same bits as in the decode forms. The register block
// reuses each loaded chunk 8 times and the CTA's warps share their x rows and weight rows
// through L1: one warp per expert over 8 tokens (the first version) re-read every token's x row
// for every expert, ~9.7 GB of L2 traffic at 8192 tokens.
constexpr int kBlockE = 8, kBlockT = 8;                 // one warp's experts × tokens
constexpr int kTileWarpsE = 4, kTileWarpsT = 2;         // warps per CTA along each
constexpr int kTileE = kBlockE * kTileWarpsE;           // 32 experts per CTA
constexpr int kTileT = kBlockT * kTileWarpsT;           // 16 tokens per CTA
constexpr int kTileThreads = 32 * kTileWarpsE * kTileWarpsT;

template <typename W>
struct CachedChunk;  // 8 router weights loaded through L1 (reused by the CTA's other warps)
template <>
struct CachedChunk<float> {
  static __device__ __forceinline__ void load(const float* p, float (&f)[8]) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p + 4));
    f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
  }
};

template <typename W>
__global__ void __launch_bounds__(kTileThreads) router_logits_kernel(const bf16_t* __restrict__ x, int T, int hidden,
                                                                     int E, const W* __restrict__ weight,
                                                                     float* __restrict__ logits) {
  pdl_grid_start();  // see launch.cuh
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int e0 = blockIdx.x * kTileE + (warp % kTileWarpsE) * kBlockE;
  if (e0 >= E) return;
  const int chunks = hidden / 8;
  // Tiles of kTileT tokens stride over grid.y (at most kMaxGridYZ): any step length.
  for (int tile = blockIdx.y; tile * kTileT < T; tile += gridDim.y) {
    const int t0 = tile * kTileT + (warp / kTileWarpsE) * kBlockT;
    if (t0 >= T) continue;
    const W* wrow[kBlockE];
    const bf16_t* xrow[kBlockT];
#pragma unroll
    for (int i = 0; i < kBlockE; ++i) wrow[i] = weight + int64_t(min(e0 + i, E - 1)) * hidden;
#pragma unroll
    for (int j = 0; j < kBlockT; ++j) xrow[j] = x + int64_t(min(t0 + j, T - 1)) * hidden;
    float acc[kBlockE][kBlockT];
#pragma unroll
    for (int i = 0; i < kBlockE; ++i)
#pragma unroll
      for (int j = 0; j < kBlockT; ++j) acc[i][j] = 0.f;
    for (int c = lane; c < chunks; c += 32) {
      float xf[kBlockT][8];
#pragma unroll
      for (int j = 0; j < kBlockT; ++j) unpack8(load_cached(xrow[j] + c * 8), xf[j]);
#pragma unroll
      for (int i = 0; i < kBlockE; ++i) {
        float wf[8];
        CachedChunk<W>::load(wrow[i] + c * 8, wf);
#pragma unroll
        for (int j = 0; j < kBlockT; ++j)
#pragma unroll
          for (int k = 0; k < 8; ++k) acc[i][j] = fmaf(xf[j][k], wf[k], acc[i][j]);
      }
    }
#pragma unroll
    for (int i = 0; i < kBlockE; ++i)
#pragma unroll
      for (int j = 0; j < kBlockT; ++j) {
        const float v = warp_sum(acc[i][j]);
        // Stores spread over the lanes: lane (i·8 + j) % 32 writes (token t0 + j, expert e0 + i).
        if (lane == (i * kBlockT + j) % 32 && e0 + i < E && t0 + j < T) logits[int64_t(t0 + j) * E + e0 + i] = v;
      }
  }
}

// Selection of steps above 8 tokens: one warp per token, kSelectWarps tokens per CTA, P experts
// per lane (E <= 32·P; a kernel per P: one kernel holding both paths took the
// E <= 1024 path's 117 registers, 16 warps per SM).
constexpr int kSelectWarps = 4;
template <int P>
__global__ void __launch_bounds__(kSelectWarps * 32) router_select_redux_kernel(
    const float* __restrict__ logits, int T, int E, int K, const float* __restrict__ bias, bool norm, float rsf,
    int32_t* __restrict__ ids, float* __restrict__ weights) {
  pdl_grid_start();  // see launch.cuh
  const int t = int(blockIdx.x) * kSelectWarps + int(threadIdx.x >> 5);
  if (t >= T) return;  // whole warps only: the selection's shuffles see full warps
  router_select_warp_redux<P>([&](int e) { return logits[int64_t(t) * E + e]; }, t, E, K, bias, norm, rsf, ids,
                              weights);
}

// The selection of steps above 8 tokens over logits [T, E] already computed.
void launch_router_select(const float* logits, int T, const RouterShape& rs, const float* bias, int32_t* ids,
                          float* topk_w, cudaStream_t stream) {
  auto* kernel = rs.n_experts <= kRouterSelectNarrow ? router_select_redux_kernel<kRouterSelectNarrow / 32>
                                                    : router_select_redux_kernel<kRouterMaxExperts / 32>;
  launch_pdl(kernel, dim3(unsigned((T + kSelectWarps - 1) / kSelectWarps)), dim3(kSelectWarps * 32), 0, stream, logits,
             T, rs.n_experts, rs.top_k, bias, rs.norm_topk_prob, rs.routed_scaling_factor, ids, topk_w);
  STRIKER_CUDA_CHECK_LAUNCH("router_select");
}

// ---- decode steps ----
constexpr int kHeld = 8;  // 8-value chunks of a weight row (and of h) per lane held in registers (rows <= 2048)
constexpr size_t kMaxSmem = 227 * 1024;  // sm_90 opt-in limit per CTA

// Each CTA takes kSpreadRows expert rows for every token of the step (the matrix is read once per
// step, not once per token) and holds them in registers, requested before griddepcontrol.wait. After
// the wait, warp t of every CTA loads token t's h, normalises it (the rmsnorm kernel's bits: lane p
// plays the row kernel's threads 8p..8p+7, rmsnorm_row.cuh) into shared memory; one barrier; then
// each warp's dot products (the router's lane order: the other forms' bits). A logit leaves its warp
// as one 64-bit word {1, fp32 bits} (`words`, [T][E]); CTA t's first warp polls token t's E words
// until every one carries the 1 (a word is written whole, so its value is there when its flag is:
// no fence, no atomic, no counter), selects the top K, and writes the words back to zero for the
// next launch. CTAs 0..T-1 select in parallel. Progress: every CTA that does not select finishes
// without waiting, and the step's dependents start only after all CTAs have started.
constexpr int kSpreadWarps = 8;  // warps per CTA; warp t normalises token t (T <= 8)
constexpr int kSpreadRows = 2;   // expert rows per CTA: 128 CTAs for 256 experts
constexpr int kSpreadGroups = kSpreadWarps / kSpreadRows;  // warps per row: token t goes to warp group t % 4
static_assert(kSpreadWarps >= kRouterDecodeMaxTokens, "one warp per token normalises");
constexpr unsigned long long kWordReady = 1ull << 32;

struct SpreadLayout {  // dynamic shared memory of one CTA
  size_t x, gamma, bias, logits, total;
};
__host__ __device__ inline SpreadLayout spread_layout(int T, int hidden, int E) {
  SpreadLayout l;
  l.x = 0;
  l.gamma = (size_t(T) * hidden * 2 + 15) & ~size_t(15);
  l.bias = l.gamma + ((size_t(hidden) * 4 + 15) & ~size_t(15));
  l.logits = l.bias + ((size_t(E) * 4 + 15) & ~size_t(15));
  l.total = l.logits + size_t(E) * 4;
  return l;
}

__device__ __forceinline__ unsigned long long ld_relaxed_u64(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_relaxed_u64(unsigned long long* p, unsigned long long v) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// P: experts per selecting lane (E <= 32·P).
template <typename W, int P>
__global__ void __launch_bounds__(kSpreadWarps * 32) router_spread_kernel(
    const bf16_t* __restrict__ x, int T, int hidden, int E, int K, const W* __restrict__ weight,
    const float* __restrict__ bias, bool norm, float rsf, float* __restrict__ logits,
    unsigned long long* __restrict__ words, int32_t* __restrict__ ids, float* __restrict__ weights,
    const float* __restrict__ gamma, float eps, bf16_t* __restrict__ x_out) {
  extern __shared__ __align__(16) unsigned char smem[];
  STRIKER_STAMPS_CTA(kRouterSpread);
  pdl_launch_dependents();
  using RW = RouterWeight<W>;
  const SpreadLayout lay = spread_layout(T, hidden, E);
  auto* xs = reinterpret_cast<bf16_t*>(smem + lay.x);
  auto* gs = reinterpret_cast<float*>(smem + lay.gamma);
  auto* bs = reinterpret_cast<float*>(smem + lay.bias);
  auto* ls = reinterpret_cast<float*>(smem + lay.logits);
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int chunks = hidden / 8;
  const int e = int(blockIdx.x) * kSpreadRows + warp % kSpreadRows;
  const int group = warp / kSpreadRows;  // this warp's tokens: group, group + kSpreadGroups, ...
  const bool dots = e < E && group < T;
  const bool selects = int(blockIdx.x) < T && warp == 0;
  // Before the wait (nothing here depends on earlier kernels): this warp's weight row, the norm's
  // gamma, the bias of the selecting CTAs.
  const W* wrow = weight + int64_t(min(e, E - 1)) * hidden;
  typename RW::Chunk held[kHeld];
  if (dots) {
#pragma unroll
    for (int i = 0; i < kHeld; ++i)
      if (lane + 32 * i < chunks) held[i] = RW::load(wrow + (lane + 32 * i) * 8);
  }
  if (gamma != nullptr)
    for (int i = int(threadIdx.x); i < hidden; i += int(blockDim.x)) gs[i] = gamma[i];
  if (int(blockIdx.x) < T)
    for (int i = int(threadIdx.x); i < E; i += int(blockDim.x)) bs[i] = bias != nullptr ? bias[i] : 0.f;
  __syncthreads();  // gamma in shared memory
  pdl_wait();       // x (or h) is the previous kernel's output
  STRIKER_STAMP(1);
  if (warp < T) {   // token `warp` into shared memory (normalised when gamma is set)
    const bf16_t* src = x + int64_t(warp) * hidden;
    uint4* dst = reinterpret_cast<uint4*>(xs + int64_t(warp) * hidden);
    if (gamma == nullptr) {
      for (int c = lane; c < chunks; c += 32) dst[c] = load_cached(src + c * 8);
    } else {
      // The row kernel's sums: lane p holds threads 8p..8p+7 (chunk c = p + 32j is elements 8c..8c+7,
      // thread 8p + k's trip j), trip by trip; chunks past the held ones go through shared memory.
      uint4 hq[kHeld];
#pragma unroll
      for (int i = 0; i < kHeld; ++i)
        if (lane + 32 * i < chunks) hq[i] = load_cached(src + (lane + 32 * i) * 8);
      float part[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
      auto add_squares = [&](const uint4& q) {
        float f[8];
        unpack8(q, f);
#pragma unroll
        for (int k = 0; k < 8; ++k) part[k] += f[k] * f[k];  // rmsnorm_partial's `ss += v * v`
      };
#pragma unroll
      for (int i = 0; i < kHeld; ++i)
        if (lane + 32 * i < chunks) add_squares(hq[i]);
      for (int c = lane + 32 * kHeld; c < chunks; c += 32) {
        const uint4 q = load_cached(src + c * 8);
        dst[c] = q;
        add_squares(q);
      }
      const float r = rmsnorm_r_of_lanes(part, hidden, eps);
      uint4* out = x_out != nullptr && blockIdx.x == 0 ? reinterpret_cast<uint4*>(x_out + int64_t(warp) * hidden)
                                                       : nullptr;
      auto apply = [&](const uint4& q, int c) {
        float f[8], y[8];
        unpack8(q, f);
        const float4 g0 = reinterpret_cast<const float4*>(gs)[2 * c], g1 = reinterpret_cast<const float4*>(gs)[2 * c + 1];
        const float g[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
#pragma unroll
        for (int k = 0; k < 8; ++k) y[k] = rmsnorm_apply(f[k], r, g[k]);
        const uint4 v = pack8(y);
        dst[c] = v;
        if (out != nullptr) out[c] = v;
      };
#pragma unroll
      for (int i = 0; i < kHeld; ++i)
        if (lane + 32 * i < chunks) apply(hq[i], lane + 32 * i);
      for (int c = lane + 32 * kHeld; c < chunks; c += 32) apply(dst[c], c);
    }
  }
  __syncthreads();  // every token's x in shared memory
  STRIKER_STAMP(2);
  if (dots) {
    for (int t = group; t < T; t += kSpreadGroups) {
      float acc = 0.f;
      const bf16_t* xt = xs + int64_t(t) * hidden;
      auto add_chunk = [&](const typename RW::Chunk& q, int c) {
        float wf[8], xf[8];
        RW::unpack(q, wf);
        unpack8(*reinterpret_cast<const uint4*>(xt + c * 8), xf);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc = fmaf(xf[j], wf[j], acc);
      };
#pragma unroll
      for (int i = 0; i < kHeld; ++i)  // held chunks first (constant indices: they stay in registers)
        if (lane + 32 * i < chunks) add_chunk(held[i], lane + 32 * i);
      for (int c = lane + 32 * kHeld; c < chunks; c += 32) add_chunk(RW::load(wrow + c * 8), c);
      const float v = warp_sum(acc);
      if (lane == 0) st_relaxed_u64(words + int64_t(t) * E + e, kWordReady | __float_as_uint(v));
    }
  }
  STRIKER_STAMP(3);  // this CTA's logits published
  // Up to 256 experts CTA t's 8 warps select token t by ranks (router_select_cta_rank; one expert per thread:
  // the router -0.2 to -0.35 µs per MoE layer against one warp's K rounds, eighteenth session); above, warp 0
  // alone (router_select_warp_redux, P experts per lane).
  if constexpr (P * 32 <= kCtaSelectWarps * 32) {
    static_assert(kSpreadWarps == kCtaSelectWarps, "one expert per thread");
    __shared__ CtaSelectSmem csm;
    if (int(blockIdx.x) >= T) return;
    const int t = int(blockIdx.x);
    unsigned long long* tw = words + int64_t(t) * E;
    const int ex = int(threadIdx.x);
    unsigned long long v = ex < E ? ld_relaxed_u64(tw + ex) : kWordReady;
    while (!__all_sync(0xffffffffu, v >= kWordReady))
      if (v < kWordReady) v = ld_relaxed_u64(tw + ex);
    STRIKER_STAMP(4);  // (thread 0: its warp saw all of its experts' logits)
    const float lg = __uint_as_float(unsigned(v));
    if (ex < E) {
      ls[ex] = lg;
      logits[int64_t(t) * E + ex] = lg;  // the logits scratch, as the other forms write it
      st_relaxed_u64(tw + ex, 0ull);      // the word back to zero
    }
    router_select_cta_rank(lg, ex < E ? bs[ex] : 0.f, [&](int q) { return ls[q]; }, t, E, K, norm, rsf, ids, weights,
                           csm);
  } else {
    if (!selects) return;
    const int t = int(blockIdx.x);
    unsigned long long* tw = words + int64_t(t) * E;
    unsigned long long v[P];
#pragma unroll
    for (int i = 0; i < P; ++i) v[i] = lane + 32 * i < E ? ld_relaxed_u64(tw + lane + 32 * i) : kWordReady;
    for (;;) {
      bool ready = true;
#pragma unroll
      for (int i = 0; i < P; ++i) ready = ready && v[i] >= kWordReady;
      if (__all_sync(0xffffffffu, ready)) break;
#pragma unroll
      for (int i = 0; i < P; ++i)
        if (v[i] < kWordReady) v[i] = ld_relaxed_u64(tw + lane + 32 * i);  // only experts < E are ever 0
    }
#pragma unroll
    for (int i = 0; i < P; ++i)
      if (lane + 32 * i < E) ls[lane + 32 * i] = __uint_as_float(unsigned(v[i]));
    __syncwarp();
    router_select_warp_redux<P>([&](int ex) { return ls[ex]; }, t, E, K, bs, norm, rsf, ids, weights);
    // Off the critical path: the logits scratch, as the other forms write it, and the words back to zero.
#pragma unroll
    for (int i = 0; i < P; ++i)
      if (lane + 32 * i < E) {
        logits[int64_t(t) * E + lane + 32 * i] = ls[lane + 32 * i];
        st_relaxed_u64(tw + lane + 32 * i, 0ull);
      }
  }
}

bool spread_fits(int T, int hidden, int E) {
  return T <= kRouterDecodeMaxTokens && spread_layout(T, hidden, E).total <= kMaxSmem;
}

template <typename W, int P>
void launch_router_spread_p(const bf16* x, int T, const RouterShape& rs, const W* weight, const float* bias,
                            float* logits, unsigned int* sync, int32_t* ids, float* topk_w,
                            const RouterInputNorm* in_norm, cudaStream_t stream) {
  auto* kernel = router_spread_kernel<W, P>;
  // Everything the CTA's static shared memory (the selection's, and a profiling build's stamps) leaves.
  static const bool ready = [&] {
    cudaFuncAttributes a{};
    STRIKER_CUDA_CHECK(cudaFuncGetAttributes(&a, kernel));
    return allow_dynamic_smem(kernel, int(kMaxSmem - a.sharedSizeBytes));
  }();
  (void)ready;
  const int E = rs.n_experts;
  const int ctas = std::max((E + kSpreadRows - 1) / kSpreadRows, T);
  launch_pdl(kernel, dim3(unsigned(ctas)), dim3(kSpreadWarps * 32), spread_layout(T, rs.hidden, E).total, stream,
             reinterpret_cast<const bf16_t*>(x), T, rs.hidden, E, rs.top_k, weight, bias, rs.norm_topk_prob,
             rs.routed_scaling_factor, logits, reinterpret_cast<unsigned long long*>(sync), ids, topk_w,
             in_norm != nullptr ? in_norm->gamma : nullptr, in_norm != nullptr ? in_norm->eps : 0.f,
             in_norm != nullptr ? reinterpret_cast<bf16_t*>(in_norm->x_out) : nullptr);
  STRIKER_CUDA_CHECK_LAUNCH("router_spread");
}

template <typename W>
void launch_router_spread(const bf16* x, int T, const RouterShape& rs, const W* weight, const float* bias,
                          float* logits, unsigned int* sync, int32_t* ids, float* topk_w,
                          const RouterInputNorm* in_norm, cudaStream_t stream) {
  if (rs.n_experts <= kRouterSelectNarrow)
    launch_router_spread_p<W, kRouterSelectNarrow / 32>(x, T, rs, weight, bias, logits, sync, ids, topk_w, in_norm,
                                                        stream);
  else
    launch_router_spread_p<W, kRouterMaxExperts / 32>(x, T, rs, weight, bias, logits, sync, ids, topk_w, in_norm,
                                                      stream);
}

// Decode steps: the spread launch (the norm inside when in_norm is set); larger steps: the rmsnorm
// kernel first when in_norm is set (the backend's larger steps get x from the o_proj residual's
// pass instead), then the logits, then the selection.
template <typename W>
void launch_router(const bf16* x, int T, const RouterShape& rs, const W* weight, const float* bias, float* logits,
                   unsigned int* sync, int32_t* ids, float* topk_w, const RouterInputNorm* in_norm, LtGemm* lt,
                   cudaStream_t stream) {
  if (T <= kRouterDecodeMaxTokens) {
    launch_router_spread(x, T, rs, weight, bias, logits, sync, ids, topk_w, in_norm, stream);
    return;
  }
  if (in_norm != nullptr) {
    rmsnorm(x, in_norm->gamma, in_norm->x_out, T, rs.hidden, in_norm->eps, stream);
    x = in_norm->x_out;
  }
  const auto* xb = reinterpret_cast<const bf16_t*>(x);
  if constexpr (std::is_same_v<W, float>) {
    const dim3 grid(unsigned((rs.n_experts + kTileE - 1) / kTileE),
                    unsigned(std::min((T + kTileT - 1) / kTileT, kMaxGridYZ)));
    launch_pdl(router_logits_kernel<W>, grid, dim3(kTileThreads), 0, stream, xb, T, rs.hidden, rs.n_experts, weight,
               logits);
    STRIKER_CUDA_CHECK_LAUNCH("router_logits");
  } else {  // bf16 router: logits[T, E] = x · Wrᵀ on the tensor cores, fp32 out (366 -> ~20 µs at 8K tokens)
    lt->gemm_bf16_f32out(x, T, rs.hidden, reinterpret_cast<const bf16*>(weight), rs.n_experts, logits, stream);
  }
  launch_router_select(logits, T, rs, bias, ids, topk_w, stream);
}

void check_router_shape(const RouterShape& rs) {
  if (rs.n_experts <= 0 || rs.n_experts > kRouterMaxExperts || rs.top_k <= 0 || rs.top_k > kRouterMaxTopK ||
      rs.top_k > rs.n_experts)
    throw Error("router_topk: unsupported experts/top-k " + std::to_string(rs.n_experts) + "/" +
                std::to_string(rs.top_k) + " (at most 1024 experts and top-8)");
}

}  // namespace

void router_topk(const bf16* x, int T, const RouterShape& rs, const bf16* weight_bf16, const float* weight_f32,
                 const float* bias, float* logits_scratch, unsigned int* counter, int32_t* topk_ids, float* topk_w,
                 cudaStream_t stream, const RouterInputNorm* in_norm, LtGemm* lt) {
  if (T <= 0) return;
  check_router_shape(rs);
  if ((weight_bf16 == nullptr) == (weight_f32 == nullptr))
    throw Error("router_topk: exactly one of the bf16 / fp32 router weights must be given");
  if (rs.hidden % 8 != 0 || logits_scratch == nullptr)
    throw Error("router_topk: hidden size must be a multiple of 8 and a logits scratch [T, E] is required");
  if (T <= kRouterDecodeMaxTokens && counter == nullptr)
    throw Error("router_topk: a decode step (T <= 8) needs the zero-initialised exchange words (kRouterSyncWords)");
  if (!spread_fits(std::min(T, kRouterDecodeMaxTokens), rs.hidden, rs.n_experts))
    throw Error("router_topk: hidden size " + std::to_string(rs.hidden) + " exceeds the decode router's shared memory");
  if (in_norm != nullptr && (in_norm->gamma == nullptr || in_norm->x_out == nullptr || in_norm->x_out == x))
    throw Error("router_topk: the input norm needs its weights and an output buffer apart from h");
  if (T > kRouterDecodeMaxTokens && weight_bf16 != nullptr && lt == nullptr)
    throw Error("router_topk: a step of more than 8 tokens with a bf16 router needs the cuBLASLt GEMM (lt)");
  if (weight_f32 != nullptr)
    launch_router(x, T, rs, weight_f32, bias, logits_scratch, counter, topk_ids, topk_w, in_norm, lt, stream);
  else
    launch_router(x, T, rs, reinterpret_cast<const bf16_t*>(weight_bf16), bias, logits_scratch, counter, topk_ids,
                  topk_w, in_norm, lt, stream);
}

void router_select_topk(const float* logits, int T, const RouterShape& rs, const float* bias, int32_t* topk_ids,
                        float* topk_w, cudaStream_t stream) {
  if (T <= 0) return;
  check_router_shape(rs);
  launch_router_select(logits, T, rs, bias, topk_ids, topk_w, stream);
}

}  // namespace striker::cuda
