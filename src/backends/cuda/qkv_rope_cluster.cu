// QKV projection + q/k-norm + RoPE + KV-cache write in one launch (qkv_rope_cluster.h).
//
// Why: at batch 1 the QKV GEMV (5120 rows of 2048) and the per-head norm/RoPE kernel behind it
// are two dependent launches, and a dependent launch costs ~3.6-4 µs of latency on its own
// (docs/performance.md, "pdl chain floor"). Here the 8 CTAs of a thread-block cluster own one
// head (grid.x = heads × 8): each computes d/8 rows of the head with gemv.cu's per-row code
// (warp_dot, the same split-K partition and reduction order, the same bf16 rounding, so every
// qkv value is bit-identical to gemv_bf16's), stores them as bf16 in its shared memory, and after
// a cluster barrier CTA t's warp 0 reads token t's whole head through distributed shared memory
// and runs qk_rope_kv.cu's per-head code (qk_rope_head.cuh). A second barrier keeps every CTA's
// shared memory alive until all remote reads are done. Every CTA reaches both barriers.
//
// Per-row result vs. gemv.cu: a row's value depends only on the split S (chunk c of the row goes
// to warp part c/32 % S, lane c % 32; lane partials accumulate in chunk order; warp_sum; parts
// summed 0..S-1 from 0.f), not on how many rows or tokens a warp carries; this kernel makes
// gemv.cu's split decision (launch_for_head_dim). NVFP4 weights (qkv_rope_kv_cluster_nvfp4) go the
// same way with nvfp4_gemv.cu's row code (warp_dot_nvfp4[_early]), its split decision, and scale2
// applied by row to the fp32 dot product before the rounding.
#include <cooperative_groups.h>

#include <climits>
#include <cstdint>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/nvfp4_decode.cuh"
#include "backends/cuda/qk_rope_head.cuh"
#include "backends/cuda/qkv_rope_cluster.h"
#include "backends/cuda/warp_dot.cuh"

namespace striker::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = 8;                      // warps per CTA (as gemv.cu)
constexpr int kCluster = 8;                    // CTAs per head
constexpr int kMaxT = kQkvClusterMaxTokens;    // == kCluster: CTA t finishes token t
static_assert(kMaxT <= kCluster, "the tail gives each token its own CTA of the cluster");
// Flint: 40 heads × 8 = 320 CTAs on 132 SMs. At 3 CTAs per SM (<= 85 registers per thread) the
// whole grid is resident in one wave; at 151 registers (16 rows in one pass) only one fits.
// (NVFP4 at T > 1: 2, as nvfp4_gemv.cu's kernels, whose two chunks in flight need ~96 registers.)
constexpr int kMinCtasPerSm = 3;

// The weights: BF16 rows (W) or NVFP4 rows (codes, scales, scale2 by row; W unused).
struct QkvWeights {
  const bf16_t* W = nullptr;
  const uint8_t* codes = nullptr;
  const uint8_t* scales = nullptr;
  RowScale2 s2;
};

// E = d/32 (elements per lane in the tail); S: warps per row (split-K: BF16 1 or 8, NVFP4 1 or 4);
// R rows per warp group per pass; NT token slots per pass (1 or 8). A CTA owns RC = d/8 rows of
// its head. grid.x = heads × 8, cluster 8: blockIdx.x / 8 is the head, the cluster rank the slice.

template <int E, int S, int R, int NT, bool kNvfp4>
__global__ void __launch_bounds__(kWarps * 32, kNvfp4 && NT > 1 ? 2 : kMinCtasPerSm) qkv_rope_cluster_kernel(
    const bf16_t* __restrict__ x, int T, int in, QkvWeights wt, int nh, int nkv,
    const float* __restrict__ q_norm_w, const float* __restrict__ k_norm_w, float eps,
    const int32_t* __restrict__ positions, const float* __restrict__ inv_freq, const int64_t* __restrict__ slots,
    int block_size, bf16_t* __restrict__ k_cache, bf16_t* __restrict__ v_cache, bf16_t* __restrict__ q_out) {
  pdl_launch_dependents();  // see launch.cuh
  constexpr int d = 32 * E, RC = d / kCluster, G = kWarps / S;
  __shared__ bf16_t head_vals[kMaxT][RC];  // this CTA's rows of the head, per token (bf16 as gemv stores)
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = int(cluster.block_rank());
  const int head = int(blockIdx.x) / kCluster;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int group = warp / S, part = warp % S;
  const bool finisher = warp == 0 && rank < T;  // finishes token `rank` of the head

  // Gammas and cos/sin depend on weights and positions only (written before the step's first
  // kernel, see qk_rope_kv.cu): computed while the kernel in front still runs.
  // Parked in shared memory, not held in registers through the GEMV part (register bound above).
  __shared__ qk_head::Prep<E> prep[32];
  if (finisher) qk_head::prepare<E>(prep[lane], rank, head, nh, nkv, q_norm_w, k_norm_w, positions, inv_freq);
  const int64_t row_base = int64_t(head) * d + int64_t(rank) * RC;
  // NVFP4 rows of pass `base` (clamped rows are computed, never stored).
  auto nv_rows = [&](int r0, const uint8_t* (&cr)[R], const uint8_t* (&sr)[R]) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t row = row_base + min(r0 + r, RC - 1);
      cr[r] = wt.codes + row * (in / 2);
      sr[r] = wt.scales + row * (in / 16);
    }
  };
  // NVFP4: the first pass's first two weight chunks per lane are loaded before the wait, as
  // nvfp4_gemv.cu's early-weights kernels do (warp_dot_nvfp4_early: the same sums as the plain form).
  [[maybe_unused]] Nvfp4Prologue<kNvfp4 ? R : 1> npr;
  if constexpr (kNvfp4) {
    const uint8_t* cr[R];
    const uint8_t* sr[R];
    nv_rows(group * R, cr, sr);
    if (group * R < RC) warp_dot_nvfp4_prologue<R>(cr, sr, in, npr, part, S);
  }
  pdl_wait();  // x is the previous kernel's output

  for (int base = 0; base < RC; base += G * R) {
    const int r0 = base + group * R;  // first CTA-local row of this warp group
    const bool live = r0 < RC;
    float acc[R][NT];
    if constexpr (kNvfp4) {
      const uint8_t* cr[R];
      const uint8_t* sr[R];
      nv_rows(r0, cr, sr);
      if (live) {
        if (base == 0) warp_dot_nvfp4_early<R, NT>(npr, cr, sr, x, in, T, in, acc, part, S);
        else warp_dot_nvfp4<R, NT>(cr, sr, x, in, T, in, acc, part, S);
      }
    } else {
      const bf16_t* w[R];
      const bf16_t* xr[R];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        w[r] = wt.W + (row_base + min(r0 + r, RC - 1)) * in;  // clamped rows are computed, never stored
        xr[r] = x;
      }
      if (live) warp_dot<R, NT>(w, xr, in, T, in, acc, part, S);
    }
    if constexpr (S > 1) {
      __shared__ float red[kWarps][R * NT];
      if (lane == 0)
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int t = 0; t < NT; ++t) red[warp][r * NT + t] = live ? acc[r][t] : 0.f;
      __syncthreads();
      if (part == 0)
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int t = 0; t < NT; ++t) {
            float v = 0.f;
#pragma unroll
            for (int p = 0; p < S; ++p) v += red[warp + p][r * NT + t];
            acc[r][t] = v;
          }
      __syncthreads();  // red is reused by the next pass
    }
    if (live && part == 0)
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t)
          if (lane == (r * NT + t) % 32 && t < T && r0 + r < RC) {
            // NVFP4: scale2 on the fp32 dot product before the rounding (FLINT.md §4), as nvfp4_gemv.
            const float y = kNvfp4 ? acc[r][t] * wt.s2.at(int(row_base) + r0 + r) : acc[r][t];
            head_vals[t][r0 + r] = __float2bfloat16_rn(round_bf16(y));
          }
  }

  cluster.sync();  // every CTA's rows are in its shared memory, visible cluster-wide
  if (finisher) {
    const int t = rank;
    float v[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int i = lane * E + e;  // element of the head; row i % RC of cluster rank i / RC
      const bf16_t* src = cluster.map_shared_rank(&head_vals[t][i % RC], unsigned(i / RC));
      v[e] = __bfloat162float(*src);
    }
    const qk_head::Prep<E> pr = prep[lane];  // written by this lane before the cluster barrier
    qk_head::finish<E>(v, pr, t, head, nh, nkv, eps, inv_freq, slots, block_size, k_cache, v_cache, q_out);
  }
  cluster.sync();  // no CTA exits (freeing head_vals) while another may still read it
}

template <int E, int S, int R, int NT, bool kNvfp4>
void launch_one(const bf16_t* x, int T, int in, const QkvWeights& wt, const HeadShape& hs, const float* qn,
                const float* kn, float eps, const int32_t* pos, const float* inv, const int64_t* slots, int B,
                bf16_t* kc, bf16_t* vc, bf16_t* qo, cudaStream_t stream) {
  const dim3 grid(unsigned((hs.n_heads + 2 * hs.n_kv_heads) * kCluster)), block(kWarps * 32);
  launch_pdl_cluster(qkv_rope_cluster_kernel<E, S, R, NT, kNvfp4>, grid, block, 0, kCluster, stream, x, T, in, wt,
                     hs.n_heads, hs.n_kv_heads, qn, kn, eps, pos, inv, slots, B, kc, vc, qo);
}

// The split decisions of gemv.cu's launch_gemv (BF16: 8 warps per row when out_dim < 32768 and
// in/8 >= 256) and of
// nvfp4_gemv.cu's launch_gemv_variant (NVFP4: 4 warps per row when out_dim < 8192 and in/32 >=
// 128): see the file comment. Rows per warp (R) only set how many loads are in flight.
template <int E, bool kNvfp4>
void launch_for_head_dim(const bf16_t* x, int T, int in, const QkvWeights& wt, const HeadShape& hs, const float* qn,
                         const float* kn, float eps, const int32_t* pos, const float* inv, const int64_t* slots,
                         int B, bf16_t* kc, bf16_t* vc, bf16_t* qo, cudaStream_t stream) {
  constexpr int RC = 32 * E / kCluster;
  const int qkv_dim = (hs.n_heads + 2 * hs.n_kv_heads) * 32 * E;
  const bool split = kNvfp4 ? qkv_dim < 8192 && in / 32 >= 128 : qkv_dim < 32768 && in / 8 >= 256;
  constexpr int kSplit = kNvfp4 ? 4 : 8;
  constexpr int kGroupsSplit = kWarps / kSplit;
  // T = 1: the CTA's rows in at most two passes (BF16 at 8 warps per row: 2 passes of 8 rows, 8
  // loads in flight per lane within the 3-CTAs-per-SM register bound). T > 1: 2 rows per pass.
  // NVFP4: 2 rows per warp as nvfp4_gemv.cu (its early form keeps two chunks of each row in flight).
  constexpr int kRowsCap = kNvfp4 ? 2 : 8;
  constexpr int RS1 = RC / kGroupsSplit < kRowsCap ? (RC / kGroupsSplit > 0 ? RC / kGroupsSplit : 1) : kRowsCap;
  constexpr int R1 = RC / kWarps > 0 ? RC / kWarps : 1;  // no split: the CTA's rows in one pass (Flint: 2 per warp)
  constexpr int R2 = RC < 2 ? RC : 2;
  auto args = [&](auto launch) { launch(x, T, in, wt, hs, qn, kn, eps, pos, inv, slots, B, kc, vc, qo, stream); };
  if (split) {
    if (T == 1) args(launch_one<E, kSplit, RS1, 1, kNvfp4>);
    else args(launch_one<E, kSplit, R2, kMaxT, kNvfp4>);
  } else {
    if (T == 1) args(launch_one<E, 1, R1, 1, kNvfp4>);
    else args(launch_one<E, 1, (R1 < 2 ? R1 : 2), kMaxT, kNvfp4>);
  }
}

template <bool kNvfp4>
void launch_qkv(const char* what, const bf16* x, int T, int in, const QkvWeights& wt, const HeadShape& hs,
                const float* q_norm_w, const float* k_norm_w, float eps, const int32_t* positions,
                const float* inv_freq, const int64_t* slots, int block_size, bf16* k_cache, bf16* v_cache,
                bf16* q_out, cudaStream_t stream) {
  const std::string w(what);
  if (T < 1 || T > kQkvClusterMaxTokens)
    throw Error(w + ": " + std::to_string(T) + " tokens (1.." + std::to_string(kQkvClusterMaxTokens) +
                " per launch)");
  const int width_multiple = kNvfp4 ? 64 : 8;
  if (in <= 0 || in % width_multiple != 0)
    throw Error(w + ": input width " + std::to_string(in) + " is not a positive multiple of " +
                std::to_string(width_multiple));
  auto misaligned = [](const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % unsigned(bytes) != 0; };
  if (misaligned(x, 16) || (kNvfp4 ? misaligned(wt.codes, 16) || misaligned(wt.scales, 4) : misaligned(wt.W, 16)))
    throw Error(w + ": activations/weights must be 16-byte (NVFP4 scales 4-byte) aligned");
  if (hs.n_heads <= 0 || hs.n_kv_heads <= 0 || int64_t(hs.n_heads + 2 * hs.n_kv_heads) * kCluster > INT32_MAX / 128)
    throw Error(w + ": bad head counts " + std::to_string(hs.n_heads) + "/" + std::to_string(hs.n_kv_heads));
  const auto* xd = reinterpret_cast<const bf16_t*>(x);
  auto* kc = reinterpret_cast<bf16_t*>(k_cache);
  auto* vc = reinterpret_cast<bf16_t*>(v_cache);
  auto* qo = reinterpret_cast<bf16_t*>(q_out);
  switch (hs.head_dim) {
    case 32: launch_for_head_dim<1, kNvfp4>(xd, T, in, wt, hs, q_norm_w, k_norm_w, eps, positions, inv_freq, slots, block_size, kc, vc, qo, stream); break;
    case 64: launch_for_head_dim<2, kNvfp4>(xd, T, in, wt, hs, q_norm_w, k_norm_w, eps, positions, inv_freq, slots, block_size, kc, vc, qo, stream); break;
    case 128: launch_for_head_dim<4, kNvfp4>(xd, T, in, wt, hs, q_norm_w, k_norm_w, eps, positions, inv_freq, slots, block_size, kc, vc, qo, stream); break;
    default:
      throw Error(w + ": head_dim " + std::to_string(hs.head_dim) + " is not 32, 64 or 128");
  }
  STRIKER_CUDA_CHECK_LAUNCH(what);
}

}  // namespace

void qkv_rope_kv_cluster(const bf16* x, int T, int in, const bf16* Wqkv, const HeadShape& hs, const float* q_norm_w,
                         const float* k_norm_w, float eps, const int32_t* positions, const float* inv_freq,
                         const int64_t* slots, int block_size, bf16* k_cache, bf16* v_cache, bf16* q_out,
                         cudaStream_t stream) {
  QkvWeights wt;
  wt.W = reinterpret_cast<const bf16_t*>(Wqkv);
  launch_qkv<false>("qkv_rope_kv_cluster", x, T, in, wt, hs, q_norm_w, k_norm_w, eps, positions, inv_freq, slots,
                    block_size, k_cache, v_cache, q_out, stream);
}

void qkv_rope_kv_cluster_nvfp4(const bf16* x, int T, int in, Nvfp4Matrix Wqkv, RowScale2 scale2, const HeadShape& hs,
                               const float* q_norm_w, const float* k_norm_w, float eps, const int32_t* positions,
                               const float* inv_freq, const int64_t* slots, int block_size, bf16* k_cache,
                               bf16* v_cache, bf16* q_out, cudaStream_t stream) {
  QkvWeights wt;
  wt.codes = Wqkv.codes;
  wt.scales = Wqkv.scales;
  wt.s2 = scale2;
  launch_qkv<true>("qkv_rope_kv_cluster_nvfp4", x, T, in, wt, hs, q_norm_w, k_norm_w, eps, positions, inv_freq,
                   slots, block_size, k_cache, v_cache, q_out, stream);
}

}  // namespace striker::cuda
