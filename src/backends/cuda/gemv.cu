#include "backends/cuda/gemv.h"

#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/norm_prologue.cuh"
#include "backends/cuda/warp_dot.cuh"

namespace striker::cuda {
namespace {

constexpr int kWarps = 8;  // warps per block
constexpr int kNT = 8;     // tokens sharing one pass over the weights

enum class Mode { Store, Residual, Logits };

// Chunks per lane loaded before pdl_wait with early weights (all of a split-K qkv row's share).
template <int NT>
constexpr int kHeadChunks = NT == 1 ? 2 : 1;
// Left alone, ptxas gives the early 8-token kernels ~95 registers (the old ones 58-64): 2 blocks
// per SM instead of 4. Asking for 4 keeps the old occupancy (<= 64 registers, no spills: ptxas -v).
template <int NT, bool kEarly>
constexpr int kMinBlocks = NT > 1 && kEarly ? 4 : 0;

// A block of kWarps warps = (kWarps/S) row groups of R rows, each group's input width split
// over S warps (split-K) so short matrices still put enough loads in flight.
// kEarly (DecodeTweaks::early_weights): each lane's first weight chunks are loaded between
// launch_dependents and wait. kNorm (DecodeTweaks::fused_norm): x is h, and the block computes
// x = rmsnorm(h, gamma) into shared memory itself (norm_prologue.cuh, bit-identical to rmsnorm()),
// while the early weight loads are in flight. Same fmaf chain per lane in every variant.
template <int R, int NT, int S, Mode M, bool kEarly, bool kNorm>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks<NT, kEarly>) gemv_kernel(const bf16_t* __restrict__ x, int T, int in,
                                                           const bf16_t* __restrict__ W, int out_dim, void* out,
                                                           const float* __restrict__ gamma, float eps) {
  constexpr int kGroups = kWarps / S;
  constexpr int kHead = kHeadChunks<NT>;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int group = warp / S, part = warp % S;
  const int o0 = (blockIdx.x * kGroups + group) * R;
  const int t0 = blockIdx.y * NT;
  const int nt = min(NT, T - t0);
  const bf16_t* w[R];
#pragma unroll
  for (int r = 0; r < R; ++r) w[r] = W + int64_t(min(o0 + r, out_dim - 1)) * in;  // clamped rows are computed, never stored
  WeightHead<R, kHead> head;
  if constexpr (kEarly) {
    pdl_launch_dependents();
    if (o0 < out_dim) load_weight_head(w, in, head, part, S);
    pdl_wait();  // x / h is written by the previous kernel: read only after this
  } else {
    pdl_grid_start();  // see launch.cuh
  }
  const bf16_t* xsrc = x + int64_t(t0) * in;
  if constexpr (kNorm) {
    extern __shared__ uint4 norm_smem[];  // [nt, in] bf16
    __shared__ float partial[kRmsVirtualWarps];
    bf16_t* xs = reinterpret_cast<bf16_t*>(norm_smem);
    rms_norm_rows<kWarps * 32>(xsrc, gamma, eps, nt, in, xs, nullptr, partial);
    xsrc = xs;
  }
  const bf16_t* xr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) xr[r] = xsrc;
  float acc[R][NT];
  if (o0 < out_dim) {
    if constexpr (kEarly) warp_dot_primed<R, NT, kHead, kNorm>(w, xr, in, nt, in, acc, head, part, S);
    else warp_dot<R, NT, kNorm>(w, xr, in, nt, in, acc, part, S);
  }
  if constexpr (S > 1) {
    __shared__ float red[kWarps][R * NT];
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) red[warp][r * NT + t] = o0 < out_dim ? acc[r][t] : 0.f;
    __syncthreads();
    if (part != 0) return;
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
  if (o0 >= out_dim) return;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      // Spread the stores over lanes: lane (r*NT+t)%32 writes element (t, o0+r).
      if (lane == (r * NT + t) % 32 && t < nt && o0 + r < out_dim) {
        const int64_t idx = int64_t(t0 + t) * out_dim + o0 + r;
        const float y = round_bf16(acc[r][t]);
        if constexpr (M == Mode::Store) {
          static_cast<bf16_t*>(out)[idx] = __float2bfloat16_rn(y);
        } else if constexpr (M == Mode::Residual) {
          bf16_t* h = static_cast<bf16_t*>(out);
          h[idx] = __float2bfloat16_rn(__bfloat162float(h[idx]) + y);
        } else {
          static_cast<float*>(out)[idx] = y;
        }
      }
    }
}

// Two output rows per warp group: gate and up of each (4 weight rows in flight per lane),
// the input width split over S warps as in gemv_kernel.
template <int NT, int S, bool kEarly>
__global__ void __launch_bounds__(kWarps * 32) gate_up_kernel(const bf16_t* __restrict__ x, int T, int in,
                                                              const bf16_t* __restrict__ Wg,
                                                              const bf16_t* __restrict__ Wu, int inter,
                                                              bf16_t* __restrict__ act) {
  constexpr int kHead = kHeadChunks<NT>;
  constexpr int kGroups = kWarps / S;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int group = warp / S, part = warp % S;
  const int o0 = (blockIdx.x * kGroups + group) * 2;
  const int t0 = blockIdx.y * NT;
  const int nt = min(NT, T - t0);
  const int oa = min(o0, inter - 1), ob = min(o0 + 1, inter - 1);
  const bf16_t* w[4] = {Wg + int64_t(oa) * in, Wu + int64_t(oa) * in, Wg + int64_t(ob) * in, Wu + int64_t(ob) * in};
  WeightHead<4, kHead> head;
  if constexpr (kEarly) {  // as gemv_kernel
    pdl_launch_dependents();
    if (o0 < inter) load_weight_head(w, in, head, part, S);
    pdl_wait();
  } else {
    pdl_grid_start();  // see launch.cuh
  }
  const bf16_t* xb = x + int64_t(t0) * in;
  const bf16_t* xr[4] = {xb, xb, xb, xb};
  float acc[4][NT];
  if (o0 < inter) {
    if constexpr (kEarly) warp_dot_primed<4, NT, kHead>(w, xr, in, nt, in, acc, head, part, S);
    else warp_dot<4, NT>(w, xr, in, nt, in, acc, part, S);
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

__global__ void __launch_bounds__(32) empty_pdl_kernel() { pdl_grid_start(); }

struct GemvArgs {
  const bf16_t* x;
  int T, in;
  const bf16_t* W;
  int out_dim;
  void* out;
  const float* gamma;  // fused norm only
  float eps;
};

template <Mode M, bool kEarly, bool kNorm>
void launch_gemv_variant(const GemvArgs& a, cudaStream_t stream) {
  const unsigned gy = unsigned((a.T + kNT - 1) / kNT);
  // Enough warps already (LM head: 75K of them) -> one warp per 2 rows. Otherwise split each
  // row over 8 warps when it is long enough (>= 256 chunks of 16 bytes). Short rows (in < 1024)
  // take 4 rows per warp so each lane still has several loads in flight.
  const bool many_rows = a.out_dim >= 32768;
  const bool split = !many_rows && a.in / 8 >= 256;
  auto blocks = [&](int rows_per_block) { return unsigned((a.out_dim + rows_per_block - 1) / rows_per_block); };
  auto go = [&](auto kernel, unsigned bx, unsigned by, int tokens_per_block) {
    // Fused norm: the block's tokens' x rows live in shared memory.
    const size_t smem = kNorm ? size_t(std::min(a.T, tokens_per_block)) * size_t(a.in) * sizeof(bf16_t) : 0;
    if (smem > 227 * 1024)
      throw Error("gemv_rmsnorm_bf16: " + std::to_string(a.in) + "-wide rows of " + std::to_string(a.T) +
                  " tokens do not fit in shared memory");
    if (smem > 48 * 1024)
      STRIKER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    launch_pdl(kernel, dim3(bx, by), dim3(kWarps * 32), smem, stream, a.x, a.T, a.in, a.W, a.out_dim, a.out, a.gamma,
               a.eps);
  };
  if (a.T == 1) {
    if (split) go(gemv_kernel<4, 1, 8, M, kEarly, kNorm>, blocks(4), 1, 1);
    else if (a.in < 1024) go(gemv_kernel<4, 1, 1, M, kEarly, kNorm>, blocks(4 * kWarps), 1, 1);
    else go(gemv_kernel<2, 1, 1, M, kEarly, kNorm>, blocks(2 * kWarps), 1, 1);
  } else {
    if (split) go(gemv_kernel<2, kNT, 8, M, kEarly, kNorm>, blocks(2), gy, kNT);
    else go(gemv_kernel<2, kNT, 1, M, kEarly, kNorm>, blocks(2 * kWarps), gy, kNT);
  }
}

template <Mode M>
void launch_gemv(const char* what, const bf16* x, int T, int in, const bf16* W, int out_dim, void* out,
                 bool early_weights, cudaStream_t stream) {
  check_shapes(what, x, in, W, out);
  if (T <= 0 || out_dim <= 0) return;
  const GemvArgs a{reinterpret_cast<const bf16_t*>(x), T, in, reinterpret_cast<const bf16_t*>(W), out_dim, out,
                   nullptr, 0.f};
  if (early_weights) launch_gemv_variant<M, true, false>(a, stream);
  else launch_gemv_variant<M, false, false>(a, stream);
  STRIKER_CUDA_CHECK_LAUNCH(what);
}

}  // namespace

void gemv_bf16(const bf16* x, int T, int in, const bf16* W, int out_dim, bf16* out, cudaStream_t stream,
               bool early_weights) {
  launch_gemv<Mode::Store>("gemv_bf16", x, T, in, W, out_dim, out, early_weights, stream);
}

void gemv_residual(const bf16* x, int T, int in, const bf16* W, int out_dim, bf16* h, cudaStream_t stream,
                   bool early_weights) {
  launch_gemv<Mode::Residual>("gemv_residual", x, T, in, W, out_dim, h, early_weights, stream);
}

void gemv_logits(const bf16* x, int T, int in, const bf16* W, int out_dim, float* logits, cudaStream_t stream,
                 bool early_weights) {
  launch_gemv<Mode::Logits>("gemv_logits", x, T, in, W, out_dim, logits, early_weights, stream);
}

void gemv_rmsnorm_bf16(const bf16* h, const FusedRmsNorm& norm, int T, int in, const bf16* W, int out_dim, bf16* out,
                       cudaStream_t stream, bool early_weights) {
  check_shapes("gemv_rmsnorm_bf16", h, in, W, out);
  if (norm.gamma == nullptr || norm.x_out != nullptr)
    throw Error("gemv_rmsnorm_bf16: needs the norm weights and does not write x (x_out must be null)");
  if (T <= 0 || out_dim <= 0) return;
  const GemvArgs a{reinterpret_cast<const bf16_t*>(h), T, in, reinterpret_cast<const bf16_t*>(W), out_dim, out,
                   norm.gamma, norm.eps};
  if (early_weights) launch_gemv_variant<Mode::Store, true, true>(a, stream);
  else launch_gemv_variant<Mode::Store, false, true>(a, stream);
  STRIKER_CUDA_CHECK_LAUNCH("gemv_rmsnorm_bf16");
}

void gemv_gate_up(const bf16* x, int T, int in, const bf16* Wg, const bf16* Wu, int inter, bf16* act,
                  cudaStream_t stream, bool early_weights) {
  check_shapes("gemv_gate_up", x, in, Wg, act);
  check_shapes("gemv_gate_up", x, in, Wu, act);
  if (T <= 0 || inter <= 0) return;
  const auto* xd = reinterpret_cast<const bf16_t*>(x);
  const auto* g = reinterpret_cast<const bf16_t*>(Wg);
  const auto* u = reinterpret_cast<const bf16_t*>(Wu);
  auto* a = reinterpret_cast<bf16_t*>(act);
  const bool split = inter < 4096 && in / 8 >= 256;  // few rows (shared expert): split each over 8 warps
  const unsigned gy = unsigned((T + kNT - 1) / kNT);
  auto blocks = [&](int rows_per_block) { return unsigned((inter + rows_per_block - 1) / rows_per_block); };
  auto go = [&](auto kernel, unsigned bx, unsigned by) {
    launch_pdl(kernel, dim3(bx, by), dim3(kWarps * 32), 0, stream, xd, T, in, g, u, inter, a);
  };
  if (T == 1) {
    if (split) early_weights ? go(gate_up_kernel<1, 8, true>, blocks(2), 1) : go(gate_up_kernel<1, 8, false>, blocks(2), 1);
    else early_weights ? go(gate_up_kernel<1, 1, true>, blocks(2 * kWarps), 1) : go(gate_up_kernel<1, 1, false>, blocks(2 * kWarps), 1);
  } else {  // no early variant: the 8-token kernels' 4x8 accumulators leave no registers for the head
            // (ptxas: the non-split one would spill 12 bytes, the split one spills already)
    if (split) go(gate_up_kernel<kNT, 8, false>, blocks(2), gy);
    else go(gate_up_kernel<kNT, 1, false>, blocks(2 * kWarps), gy);
  }
  STRIKER_CUDA_CHECK_LAUNCH("gemv_gate_up");
}

void launch_empty_pdl(int blocks, cudaStream_t stream) {
  launch_pdl(empty_pdl_kernel, dim3(unsigned(blocks)), dim3(32), 0, stream);
  STRIKER_CUDA_CHECK_LAUNCH("empty_pdl_kernel");
}

}  // namespace striker::cuda
