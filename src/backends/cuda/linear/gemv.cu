#include "backends/cuda/linear/gemv.h"

#include <algorithm>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/linear/gemv_out.cuh"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/stamps.cuh"
#include "backends/cuda/common/warp_dot.cuh"
#include "backends/cuda/elementwise/rmsnorm_row.cuh"
#include "backends/cuda/linear/skinny_bf16.cuh"

namespace striker::cuda {
namespace {

constexpr int kWarps = 8;  // warps per block

using Mode = GemvOut;

// A block of kWarps warps = (kWarps/S) row groups of R rows, each group's input width split
// over S warps (split-K) so short matrices still put enough loads in flight.
// Except for the LM head, each warp loads its first weight chunks before griddepcontrol.wait
// (WarpDotPrologue, warp_dot.cuh): for QKV (one chunk per lane) and o_proj (two) that is every
// weight byte, streamed while the kernel in front drains.
// kNorm (one token): x is h, and every CTA forms x = rmsnorm(h) (gamma, eps) in shared memory
// after the wait (block_rmsnorm_row: the rmsnorm kernel's bits), gamma staged before it.
template <int R, int NT, int S, Mode M, bool kNorm = false>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(const bf16_t* __restrict__ x, int T, int in,
                                                           const bf16_t* __restrict__ W, int out_dim, void* out,
                                                           const float* __restrict__ gamma, float eps) {
  static_assert(!kNorm || (NT == 1 && kWarps * 32 == kRmsnormRowThreads), "the block norm: one token, 256 threads");
  // The LM head streams 8+ chunks per lane: its weights keep the deeper-unrolled loop after the wait,
  // except with the norm inside, where the first two chunks are in flight while the CTA normalises.
  constexpr int kPre = M == Mode::Logits && !kNorm ? 0 : (NT == 1 ? 2 : 1);
  STRIKER_STAMPS_CTA(kBf16Gemv);
  pdl_launch_dependents();  // see launch.cuh
  constexpr int kGroups = kWarps / S;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int group = warp / S, part = warp % S;
  const int o0 = (blockIdx.x * kGroups + group) * R;
  const int t0 = blockIdx.y * NT;
  const int nt = min(NT, T - t0);
  const bf16_t* w[R];
  const bf16_t* xr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    w[r] = W + int64_t(min(o0 + r, out_dim - 1)) * in;  // clamped rows are computed, never stored
    xr[r] = x + int64_t(t0) * in;
  }
  float acc[R][NT];
  float hv[R][NT] = {};  // Residual: h at the lane's own outputs
  if constexpr (kNorm) {
    static_assert(M != Mode::Residual, "the residual's h is loaded after the other branch's wait");
    __shared__ BlockNormSmem ns;
    block_norm_stage_gamma(gamma, in, ns);
#pragma unroll
    for (int r = 0; r < R; ++r) xr[r] = ns.x;
    if constexpr (kPre > 0) {
      WarpDotPrologue<R, kPre> pr;
      if (o0 < out_dim) warp_dot_prologue<R, kPre>(w, in, pr, part, S);
      pdl_wait();  // h comes from earlier kernels
      STRIKER_STAMP(1);
      block_rmsnorm_row(x, in, eps, ns);
      STRIKER_STAMP(2);
      if (o0 < out_dim) warp_dot_after_prologue<R, NT, kPre, true>(pr, w, xr, in, nt, in, acc, part, S);
    } else {
      pdl_wait();
      STRIKER_STAMP(1);
      block_rmsnorm_row(x, in, eps, ns);
      STRIKER_STAMP(2);
      if (o0 < out_dim) warp_dot<R, NT, true>(w, xr, in, nt, in, acc, part, S);
    }
  } else if constexpr (kPre > 0) {
    WarpDotPrologue<R, kPre> pr;
    if (o0 < out_dim) warp_dot_prologue<R, kPre>(w, in, pr, part, S);
    pdl_wait();  // x (and h in Residual mode) come from earlier kernels
    STRIKER_STAMP(1);
    preload_residual_h<M>(out, out_dim, o0, t0, nt, lane, part, hv);  // added at the end (gemv_out.cuh)
    if (o0 < out_dim) warp_dot_after_prologue<R, NT, kPre>(pr, w, xr, in, nt, in, acc, part, S);
  } else {
    static_assert(M != Mode::Residual, "the residual's h is loaded after the other branch's wait");
    pdl_wait();
    STRIKER_STAMP(1);
    if (o0 < out_dim) warp_dot<R, NT>(w, xr, in, nt, in, acc, part, S);
  }
  STRIKER_STAMP(3);
  bool stores = o0 < out_dim;  // this warp holds finished sums to store
  if constexpr (S > 1) {
    __shared__ float red[kWarps][R * NT];
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) red[warp][r * NT + t] = o0 < out_dim ? acc[r][t] : 0.f;
    __syncthreads();
    stores = stores && part == 0;
    if (stores) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          float v = 0.f;
#pragma unroll
          for (int p = 0; p < S; ++p) v += red[warp + p][r * NT + t];
          acc[r][t] = v;
        }
    }
  }
  if (stores) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        // Spread the stores over lanes: lane (r*NT+t)%32 writes element (t, o0+r).
        if (lane == (r * NT + t) % 32 && t < nt && o0 + r < out_dim) {
          const int64_t idx = int64_t(t0 + t) * out_dim + o0 + r;
          store_gemv_out_h<M>(out, idx, round_bf16(acc[r][t]), hv[r][t]);
        }
      }
  }
}

// Two output rows per warp group: gate and up of each (4 weight rows in flight per lane),
// the input width split over S warps as in gemv_kernel.
// kNorm (one token): x is h, normalised by every CTA as in gemv_kernel.
template <int NT, int S, bool kNorm = false>
__global__ void __launch_bounds__(kWarps * 32) gate_up_kernel(const bf16_t* __restrict__ x, int T, int in,
                                                              const bf16_t* __restrict__ Wg,
                                                              const bf16_t* __restrict__ Wu, int inter,
                                                              bf16_t* __restrict__ act, const float* __restrict__ gamma,
                                                              float eps) {
  static_assert(!kNorm || (NT == 1 && kWarps * 32 == kRmsnormRowThreads), "the block norm: one token, 256 threads");
  STRIKER_STAMPS_CTA(kBf16GateUp);
  pdl_launch_dependents();  // see launch.cuh
  constexpr int kGroups = kWarps / S;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int group = warp / S, part = warp % S;
  const int o0 = (blockIdx.x * kGroups + group) * 2;
  const int t0 = blockIdx.y * NT;
  const int nt = min(NT, T - t0);
  const int oa = min(o0, inter - 1), ob = min(o0 + 1, inter - 1);
  const bf16_t* w[4] = {Wg + int64_t(oa) * in, Wu + int64_t(oa) * in, Wg + int64_t(ob) * in, Wu + int64_t(ob) * in};
  float acc[4][NT];
  if constexpr (kNorm) {  // each lane's first two weight chunks in flight while the CTA normalises
    __shared__ BlockNormSmem ns;
    WarpDotPrologue<4, 2> pr;
    if (o0 < inter) warp_dot_prologue<4, 2>(w, in, pr, part, S);
    block_norm_stage_gamma(gamma, in, ns);
    pdl_wait();  // h comes from earlier kernels
    STRIKER_STAMP(1);
    block_rmsnorm_row(x, in, eps, ns);
    STRIKER_STAMP(2);
    const bf16_t* xr[4] = {ns.x, ns.x, ns.x, ns.x};
    if (o0 < inter) warp_dot_after_prologue<4, NT, 2, true>(pr, w, xr, in, nt, in, acc, part, S);
  } else {
    pdl_wait();  // x comes from earlier kernels
    STRIKER_STAMP(1);
    const bf16_t* xb = x + int64_t(t0) * in;
    const bf16_t* xr[4] = {xb, xb, xb, xb};
    if (o0 < inter) warp_dot<4, NT>(w, xr, in, nt, in, acc, part, S);
  }
  if constexpr (S > 1) {
    __shared__ float red[kWarps][4 * NT];
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) red[warp][r * NT + t] = o0 < inter ? acc[r][t] : 0.f;
    __syncthreads();
    if (part != 0) return;
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        float v = 0.f;
#pragma unroll
        for (int p = 0; p < S; ++p) v += red[warp + p][r * NT + t];
        acc[r][t] = v;
      }
  }
  if (o0 >= inter) return;
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int t = 0; t < NT; ++t)
      if (lane == (j * NT + t) % 32 && t < nt && o0 + j < inter) {
        const float g = round_bf16(acc[2 * j][t]);
        const float u = round_bf16(acc[2 * j + 1][t]);
        act[int64_t(t0 + t) * inter + o0 + j] = __float2bfloat16_rn(silu_bf16(g) * u);
      }
}

void check_shapes(const char* what, const void* x, int in, const void* W, const void* out) {
  auto misaligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 != 0; };
  if (in <= 0 || in % 8 != 0)
    throw Error(std::string(what) + ": input width " + std::to_string(in) + " is not a positive multiple of 8");
  if (misaligned(x) || misaligned(W) || out == nullptr)
    throw Error(std::string(what) + ": activation/weight pointers must be 16-byte aligned");
}

// One 1-token gemv_kernel launch, with the input norm inside when `norm` is set.
template <int R, int S, Mode M>
void launch_gemv_1(dim3 grid, const bf16_t* x, int in, const bf16_t* W, int out_dim, void* out, const InputNorm* norm,
                   cudaStream_t stream) {
  if constexpr (M != Mode::Residual) {
    if (norm != nullptr) {
      launch_pdl(gemv_kernel<R, 1, S, M, true>, grid, dim3(kWarps * 32), 0, stream, x, 1, in, W, out_dim, out,
                 norm->gamma, norm->eps);
      return;
    }
  }
  launch_pdl(gemv_kernel<R, 1, S, M>, grid, dim3(kWarps * 32), 0, stream, x, 1, in, W, out_dim, out,
             static_cast<const float*>(nullptr), 0.f);
}

template <Mode M>
void launch_gemv(const char* what, const bf16* x, int T, int in, const bf16* W, int out_dim, void* out,
                 cudaStream_t stream, const InputNorm* norm = nullptr) {
  check_shapes(what, x, in, W, out);
  if (norm != nullptr) check_input_norm(what, *norm, T, in);
  if (T <= 0 || out_dim <= 0) return;
  const auto* xd = reinterpret_cast<const bf16_t*>(x);
  const auto* Wd = reinterpret_cast<const bf16_t*>(W);
  if (T > 1) {
    launch_skinny_bf16<SkinnyTile::Gemv, M>(xd, in, Wd, Wd, out_dim, out, T, stream);
    STRIKER_CUDA_CHECK_LAUNCH(what);
    return;
  }
  // Short rows (in < 1024) take 4 rows per warp so each lane still has several loads in flight.
  // Enough warps already (LM head: 75K of them) -> one warp per 2 rows. Otherwise split each
  // row over several warps when it is long enough (>= 256 chunks of 16 bytes): over 4 warps for
  // Store outputs (QKV: 640 CTAs of 8 rows, 2 chunks per lane per row, all requested before the
  // wait), over 8 for Residual (o_proj). QKV over 8 warps (1,280 CTAs, 2.4 waves behind the MoE
  // down kernel, each CTA paying its norm) cost 9.5 µs of the chain against 6.3 (H200, thirteenth
  // session, docs/performance.md).
  const bool many_rows = out_dim >= 32768;
  const bool split = !many_rows && in / 8 >= 256;
  auto blocks = [&](int rows_per_block) { return unsigned((out_dim + rows_per_block - 1) / rows_per_block); };
  if (split && M == Mode::Store) launch_gemv_1<4, 4, M>(dim3(blocks(8)), xd, in, Wd, out_dim, out, norm, stream);
  else if (split) launch_gemv_1<4, 8, M>(dim3(blocks(4)), xd, in, Wd, out_dim, out, norm, stream);
  else if (in < 1024) launch_gemv_1<4, 1, M>(dim3(blocks(4 * kWarps)), xd, in, Wd, out_dim, out, norm, stream);
  else launch_gemv_1<2, 1, M>(dim3(blocks(2 * kWarps)), xd, in, Wd, out_dim, out, norm, stream);
  STRIKER_CUDA_CHECK_LAUNCH(what);
}

void launch_gate_up(const bf16* x, int T, int in, const bf16* Wg, const bf16* Wu, int inter, bf16* act,
                    cudaStream_t stream, const InputNorm* norm) {
  check_shapes("gemv_gate_up", x, in, Wg, act);
  check_shapes("gemv_gate_up", x, in, Wu, act);
  if (norm != nullptr) check_input_norm("gemv_gate_up", *norm, T, in);
  if (T <= 0 || inter <= 0) return;
  const auto* xd = reinterpret_cast<const bf16_t*>(x);
  const auto* g = reinterpret_cast<const bf16_t*>(Wg);
  const auto* u = reinterpret_cast<const bf16_t*>(Wu);
  auto* a = reinterpret_cast<bf16_t*>(act);
  if (T > 1) {
    launch_skinny_bf16<SkinnyTile::GateUp, Mode::Store>(xd, in, g, u, inter, a, T, stream);
    STRIKER_CUDA_CHECK_LAUNCH("gemv_gate_up");
    return;
  }
  const bool split = inter < 4096 && in / 8 >= 256;  // few rows (shared expert): split each over 8 warps
  auto blocks = [&](int rows_per_block) { return unsigned((inter + rows_per_block - 1) / rows_per_block); };
  const float* gamma = norm != nullptr ? norm->gamma : nullptr;
  const float eps = norm != nullptr ? norm->eps : 0.f;
  const dim3 block(kWarps * 32);
  if (split && norm) launch_pdl(gate_up_kernel<1, 8, true>, dim3(blocks(2)), block, 0, stream, xd, T, in, g, u, inter, a, gamma, eps);
  else if (split) launch_pdl(gate_up_kernel<1, 8>, dim3(blocks(2)), block, 0, stream, xd, T, in, g, u, inter, a, gamma, eps);
  else if (norm) launch_pdl(gate_up_kernel<1, 1, true>, dim3(blocks(2 * kWarps)), block, 0, stream, xd, T, in, g, u, inter, a, gamma, eps);
  else launch_pdl(gate_up_kernel<1, 1>, dim3(blocks(2 * kWarps)), block, 0, stream, xd, T, in, g, u, inter, a, gamma, eps);
  STRIKER_CUDA_CHECK_LAUNCH("gemv_gate_up");
}

}  // namespace

// Tensor cores from 2 tokens on (skinny_bf16.cuh), the CUDA-core kernels at 1: measured on the
// H200 (docs/performance.md, "Decode kernels at 1 token"), the tensor-core kernels tie or lose at
// one token (o_proj 9.7 vs 6.8 µs, LM head 162 vs 135) and win 3-7x from two on.
void gemv_bf16(const bf16* x, int T, int in, const bf16* W, int out_dim, bf16* out, cudaStream_t stream,
               const InputNorm* norm) {
  launch_gemv<Mode::Store>("gemv_bf16", x, T, in, W, out_dim, out, stream, norm);
}

void gemv_residual(const bf16* x, int T, int in, const bf16* W, int out_dim, bf16* h, cudaStream_t stream) {
  launch_gemv<Mode::Residual>("gemv_residual", x, T, in, W, out_dim, h, stream);
}

void gemv_logits(const bf16* x, int T, int in, const bf16* W, int out_dim, float* logits, cudaStream_t stream,
                 const InputNorm* norm) {
  launch_gemv<Mode::Logits>("gemv_logits", x, T, in, W, out_dim, logits, stream, norm);
}

void gemv_gate_up(const bf16* x, int T, int in, const bf16* Wg, const bf16* Wu, int inter, bf16* act,
                  cudaStream_t stream, const InputNorm* norm) {
  launch_gate_up(x, T, in, Wg, Wu, inter, act, stream, norm);
}

}  // namespace striker::cuda
