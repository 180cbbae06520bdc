#include <algorithm>
#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/linear/gemv_out.cuh"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/stamps.cuh"
#include "backends/cuda/nvfp4/nvfp4_decode.cuh"
#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "backends/cuda/common/warp_dot.cuh"
#include "backends/cuda/elementwise/rmsnorm_row.cuh"
#include "backends/cuda/nvfp4/nvfp4_skinny.cuh"

namespace striker::cuda {
namespace {

constexpr int kWarps = 8;  // warps per block

using Mode = GemvOut;

// The one-token kernels decode E2M1 pairs with shifts: the one-multiply form (fewer instructions, faster
// in the per-slot MoE and skinny kernels) cost +0.5 us per call here (nvfp4_bits.h E2m1Pairs).
constexpr E2m1Pairs kPairs = E2m1Pairs::kShifts;

// One token. Same shape as gemv.cu's gemv_kernel: (kWarps/S) row groups of R rows per block, each
// row's input split over S warps; the dot product (on tensor cores: warp_dot_nvfp4_early_mma,
// nvfp4_decode.cuh) is scaled by the row's scale2 before rounding. Each warp loads its first two
// chunks of weights before pdl_wait (nvfp4_linear.h). Held to 3 CTAs per SM (80 registers, so qkv's
// 320 CTAs stay one wave on 132 SMs).
// kNorm (one token): x is h, and every CTA forms x = rmsnorm(h) in shared memory after the wait
// (gemv.cu's gemv_kernel, block_rmsnorm_row: the rmsnorm kernel's bits).
template <int R, int NT, int S, Mode M, bool kNorm = false>
__global__ void __launch_bounds__(kWarps * 32, NT == 1 ? 3 : 2)
    nvfp4_gemv_kernel(const bf16_t* __restrict__ x, int T, int in, const uint8_t* __restrict__ codes,
                      const uint8_t* __restrict__ scales, RowScale2 s2, int out_dim, void* out,
                      const float* __restrict__ gamma, float eps) {
  static_assert(!kNorm || (NT == 1 && kWarps * 32 == kRmsnormRowThreads), "the block norm: one token, 256 threads");
  STRIKER_STAMPS_CTA(kNvfp4Gemv);
  pdl_launch_dependents();  // see launch.cuh
  constexpr int kGroups = kWarps / S;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int group = warp / S, part = warp % S;
  const int o0 = (blockIdx.x * kGroups + group) * R;
  const int t0 = blockIdx.y * NT;
  const int nt = min(NT, T - t0);
  const uint8_t* cr[R];
  const uint8_t* sr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = min(o0 + r, out_dim - 1);  // clamped rows are computed, never stored
    cr[r] = codes + row * (in / 2);
    sr[r] = scales + row * (in / 16);
  }
  float acc[R][NT];
  float hv[R][NT] = {};  // Residual: h at the lane's own outputs
  Nvfp4Prologue<R> pr;
  if (o0 < out_dim) warp_dot_nvfp4_prologue_mma<R>(cr, sr, in, pr, part, S);
  if constexpr (kNorm) {
    __shared__ BlockNormSmem ns;
    block_norm_stage_gamma(gamma, in, ns);
    pdl_wait();  // h is written by earlier kernels
    STRIKER_STAMP(1);
    block_rmsnorm_row(x, in, eps, ns);
    STRIKER_STAMP(2);
    if (o0 < out_dim) warp_dot_nvfp4_early_mma<R, true, kPairs>(pr, cr, sr, ns.x, in, acc, part, S);
  } else {
    pdl_wait();  // x and h (Residual) are written by earlier kernels
    STRIKER_STAMP(1);
    preload_residual_h<M>(out, out_dim, o0, t0, nt, lane, part, hv);  // added at the end (gemv_out.cuh)
    if (o0 < out_dim) warp_dot_nvfp4_early_mma<R, false, kPairs>(pr, cr, sr, x + int64_t(t0) * in, in, acc, part, S);
  }
  STRIKER_STAMP(3);
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
      if (lane == (r * NT + t) % 32 && t < nt && o0 + r < out_dim) {
        const int64_t idx = int64_t(t0 + t) * out_dim + o0 + r;
        store_gemv_out_h<M>(out, idx, round_bf16(acc[r][t] * s2.at(o0 + r)), hv[r][t]);  // scale2 before the rounding (FLINT.md §4)
      }
    }
}

// Gate and up of two output rows per warp (4 weight rows in flight), one pass, then SwiGLU.
// Weights before pdl_wait as nvfp4_gemv_kernel's; the T = 1 form is held to 2 CTAs per SM (left
// alone, ptxas takes ~170 registers, 1 CTA per SM: the dense layer's 512 CTAs ran in 4 waves).
// kNorm (one token): x is h, normalised by every CTA as in nvfp4_gemv_kernel (so no warp leaves
// before the norm's barriers).
template <int NT, bool kNorm = false>
__global__ void __launch_bounds__(kWarps * 32, NT == 1 ? 2 : 1)
    nvfp4_gate_up_kernel(const bf16_t* __restrict__ x, int T, int in, Nvfp4Matrix wg, float s2g, Nvfp4Matrix wu,
                         float s2u, int inter, bf16_t* __restrict__ act, const float* __restrict__ gamma, float eps) {
  static_assert(!kNorm || (NT == 1 && kWarps * 32 == kRmsnormRowThreads), "the block norm: one token, 256 threads");
  STRIKER_STAMPS_CTA(kNvfp4GateUp);
  pdl_launch_dependents();  // see launch.cuh
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int o0 = (blockIdx.x * kWarps + warp) * 2;
  const bool live = o0 < inter;
  if (!kNorm && !live) return;
  const int t0 = blockIdx.y * NT;
  const int nt = min(NT, T - t0);
  const int64_t oa = min(o0, inter - 1), ob = min(o0 + 1, inter - 1);
  const int64_t cb = in / 2, sb = in / 16;
  const uint8_t* cr[4] = {wg.codes + oa * cb, wu.codes + oa * cb, wg.codes + ob * cb, wu.codes + ob * cb};
  const uint8_t* sr[4] = {wg.scales + oa * sb, wu.scales + oa * sb, wg.scales + ob * sb, wu.scales + ob * sb};
  float acc[4][NT];
  Nvfp4Prologue<4> pr;
  if (live) warp_dot_nvfp4_prologue_mma<4>(cr, sr, in, pr);
  if constexpr (kNorm) {
    __shared__ BlockNormSmem ns;
    block_norm_stage_gamma(gamma, in, ns);
    pdl_wait();  // h is written by earlier kernels
    STRIKER_STAMP(1);
    block_rmsnorm_row(x, in, eps, ns);
    STRIKER_STAMP(2);
    if (!live) return;
    warp_dot_nvfp4_early_mma<4, true, kPairs>(pr, cr, sr, ns.x, in, acc);
  } else {
    pdl_wait();  // x is written by the previous kernel
    STRIKER_STAMP(1);
    warp_dot_nvfp4_early_mma<4, false, kPairs>(pr, cr, sr, x + int64_t(t0) * in, in, acc);
  }
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int t = 0; t < NT; ++t)
      if (lane == (j * NT + t) % 32 && t < nt && o0 + j < inter) {
        const float g = round_bf16(acc[2 * j][t] * s2g);
        const float u = round_bf16(acc[2 * j + 1][t] * s2u);
        act[int64_t(t0 + t) * inter + o0 + j] = __float2bfloat16_rn(silu_bf16(g) * u);
      }
}

// One thread per 16-weight group (8 code bytes, 1 scale byte -> 32 output bytes). Exact: an
// E2M1 value has at most 2 significant bits and an E4M3 scale at most 4 (subnormal scales
// m·2^-9 have at most 3), so the product has at most 5 of bf16's 8; its magnitude lies in
// [2^-10, 6·448], far inside bf16's normal range, so even the subnormal-scale corner is exact.
__global__ void nvfp4_dequant_kernel(const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                                     int64_t groups, bf16_t* __restrict__ out) {
  pdl_grid_start();  // see launch.cuh
  for (int64_t gi = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; gi < groups;
       gi += int64_t(gridDim.x) * blockDim.x) {
    const uint2 c = *reinterpret_cast<const uint2*>(codes + gi * 8);
    const float s = ue4m3_x2p14(scales[gi]);
    float f[16];
    decode16(c.x, c.y, f);
    uint32_t packed[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const __nv_bfloat162 v = __floats2bfloat162_rn(f[2 * j] * s, f[2 * j + 1] * s);
      packed[j] = *reinterpret_cast<const uint32_t*>(&v);
    }
    uint4* dst = reinterpret_cast<uint4*>(out + gi * 16);
    dst[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    dst[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
  }
}

__device__ __forceinline__ uint64_t mix64(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// codes: 8 random bytes per thread step (n8 = code bytes / 8); scales: one byte in [lo, hi], canonical
// (nvfp4_scales.h: a drawn 0x7F is stored as 0x00).
__global__ void nvfp4_fill_kernel(uint8_t* __restrict__ codes, int64_t n8, uint8_t* __restrict__ scales,
                                  int64_t n_scales, uint64_t seed, uint32_t lo, uint32_t range) {
  pdl_grid_start();  // see launch.cuh
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n8; i += stride)
    reinterpret_cast<uint64_t*>(codes)[i] = mix64(seed, uint64_t(i));
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n_scales; i += stride)
    scales[i] = uint8_t(nvfp4_canonical_scale(lo + uint32_t((mix64(~seed, uint64_t(i)) >> 33) % range)));
}

bool misaligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % unsigned(bytes) != 0; }

void check_nvfp4(const char* what, const void* x, int in, Nvfp4Matrix W, const void* out) {
  if (in <= 0 || in % 64 != 0)
    throw Error(std::string(what) + ": input width " + std::to_string(in) + " is not a positive multiple of 64");
  if (misaligned(x, 16) || misaligned(W.codes, 16) || misaligned(W.scales, 4) || out == nullptr)
    throw Error(std::string(what) + ": activations/codes must be 16-byte and scales 4-byte aligned");
}

// One 1-token nvfp4_gemv_kernel launch, with the input norm inside when `norm` is set.
template <int R, int S, Mode M>
void launch_gemv_1(dim3 grid, const bf16_t* x, int in, Nvfp4Matrix W, RowScale2 s2, int out_dim, void* out,
                   const InputNorm* norm, cudaStream_t stream) {
  if constexpr (M == Mode::Store) {
    if (norm != nullptr) {
      launch_pdl(nvfp4_gemv_kernel<R, 1, S, M, true>, grid, dim3(kWarps * 32), 0, stream, x, 1, in, W.codes, W.scales,
                 s2, out_dim, out, norm->gamma, norm->eps);
      return;
    }
  }
  launch_pdl(nvfp4_gemv_kernel<R, 1, S, M>, grid, dim3(kWarps * 32), 0, stream, x, 1, in, W.codes, W.scales, s2,
             out_dim, out, static_cast<const float*>(nullptr), 0.f);
}

template <Mode M>
void launch_gemv(const char* what, const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 s2, int out_dim, void* out,
                 cudaStream_t stream, const InputNorm* norm = nullptr) {
  check_nvfp4(what, x, in, W, out);
  if (norm != nullptr) check_input_norm(what, *norm, T, in);
  if (T <= 0 || out_dim <= 0) return;
  const auto* xd = reinterpret_cast<const bf16_t*>(x);
  if (T > 1) {
    launch_nvfp4_skinny<SkinnyTile::Gemv, M>(xd, in, W, W, out_dim, out, T, s2, stream);
    STRIKER_CUDA_CHECK_LAUNCH(what);
    return;
  }
  auto blocks = [&](int rows_per_block) { return unsigned((out_dim + rows_per_block - 1) / rows_per_block); };
  // A row is in/32 chunks of 16 bytes. Long rows of short matrices (o_proj, dense down) split
  // each row over 4 warps so enough loads are in flight; the LM head has warps to spare.
  const bool split = out_dim < 8192 && in / 32 >= 128;
  constexpr int S = 4;
  if (split) launch_gemv_1<2, S, M>(dim3(blocks(2 * kWarps / S)), xd, in, W, s2, out_dim, out, norm, stream);
  else launch_gemv_1<2, 1, M>(dim3(blocks(2 * kWarps)), xd, in, W, s2, out_dim, out, norm, stream);
  STRIKER_CUDA_CHECK_LAUNCH(what);
}

unsigned grid_for(int64_t n, int threads) {
  return unsigned(std::min<int64_t>((n + threads - 1) / threads, 65535 * 8));
}

void launch_gate_up(const bf16* x, int T, int in, Nvfp4Matrix Wg, float scale2_g, Nvfp4Matrix Wu, float scale2_u,
                    int inter, bf16* act, cudaStream_t stream, const InputNorm* norm) {
  check_nvfp4("nvfp4_gemv_gate_up", x, in, Wg, act);
  check_nvfp4("nvfp4_gemv_gate_up", x, in, Wu, act);
  if (norm != nullptr) check_input_norm("nvfp4_gemv_gate_up", *norm, T, in);
  if (T <= 0 || inter <= 0) return;
  const auto* xd = reinterpret_cast<const bf16_t*>(x);
  auto* a = reinterpret_cast<bf16_t*>(act);
  if (T > 1) {
    // skinny_store reads gate's scale2 at 0 and up's at 1.
    const RowScale2 s2{1, 2, {scale2_g, scale2_u, scale2_u}};
    launch_nvfp4_skinny<SkinnyTile::GateUp, Mode::Store>(xd, in, Wg, Wu, inter, a, T, s2, stream);
    STRIKER_CUDA_CHECK_LAUNCH("nvfp4_gemv_gate_up");
    return;
  }
  const dim3 grid(unsigned((inter + 2 * kWarps - 1) / (2 * kWarps)), 1u);
  if (norm != nullptr)
    launch_pdl(nvfp4_gate_up_kernel<1, true>, grid, dim3(kWarps * 32), 0, stream, xd, T, in, Wg, scale2_g, Wu,
               scale2_u, inter, a, norm->gamma, norm->eps);
  else
    launch_pdl(nvfp4_gate_up_kernel<1>, grid, dim3(kWarps * 32), 0, stream, xd, T, in, Wg, scale2_g, Wu, scale2_u,
               inter, a, static_cast<const float*>(nullptr), 0.f);
  STRIKER_CUDA_CHECK_LAUNCH("nvfp4_gemv_gate_up");
}

}  // namespace

// The skinny GEMMs from 2 tokens on (nvfp4_skinny.cuh), the one-token kernels above at 1 (measured on
// the H200: docs/performance.md, "Decode kernels at 1 token" and the sixteenth session).
void nvfp4_gemv(const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2, int out_dim, bf16* out,
                cudaStream_t stream, const InputNorm* norm) {
  launch_gemv<Mode::Store>("nvfp4_gemv", x, T, in, W, scale2, out_dim, out, stream, norm);
}

void nvfp4_gemv_residual(const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2, int out_dim, bf16* h,
                         cudaStream_t stream) {
  launch_gemv<Mode::Residual>("nvfp4_gemv_residual", x, T, in, W, scale2, out_dim, h, stream);
}

void nvfp4_gemv_logits(const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2, int out_dim, float* logits,
                       cudaStream_t stream) {
  launch_gemv<Mode::Logits>("nvfp4_gemv_logits", x, T, in, W, scale2, out_dim, logits, stream);
}

void nvfp4_gemv_gate_up(const bf16* x, int T, int in, Nvfp4Matrix Wg, float scale2_g, Nvfp4Matrix Wu,
                        float scale2_u, int inter, bf16* act, cudaStream_t stream, const InputNorm* norm) {
  launch_gate_up(x, T, in, Wg, scale2_g, Wu, scale2_u, inter, act, stream, norm);
}

void nvfp4_dequantize(Nvfp4Matrix W, int64_t rows, int in, bf16* out, cudaStream_t stream) {
  if (in <= 0 || in % 64 != 0)
    throw Error("nvfp4_dequantize: input width " + std::to_string(in) + " is not a positive multiple of 64");
  if (misaligned(W.codes, 8) || misaligned(out, 16))
    throw Error("nvfp4_dequantize: codes must be 8-byte and the output 16-byte aligned");
  const int64_t groups = rows * (in / 16);
  if (groups <= 0) return;
  launch_pdl(nvfp4_dequant_kernel, dim3(grid_for(groups, 256)), dim3(256), 0, stream, W.codes, W.scales, groups,
             reinterpret_cast<bf16_t*>(out));
  STRIKER_CUDA_CHECK_LAUNCH("nvfp4_dequantize");
}

void nvfp4_fill_random(uint8_t* codes, uint8_t* scales, int64_t rows, int in, uint64_t seed, uint8_t scale_lo,
                       uint8_t scale_hi, cudaStream_t stream) {
  if (in <= 0 || in % 64 != 0)
    throw Error("nvfp4_fill_random: input width " + std::to_string(in) + " is not a positive multiple of 64");
  if (scale_hi < scale_lo || misaligned(codes, 8)) throw Error("nvfp4_fill_random: bad scale range or alignment");
  const int64_t n8 = rows * (in / 2) / 8, n_scales = rows * (in / 16);
  if (n8 <= 0) return;
  launch_pdl(nvfp4_fill_kernel, dim3(grid_for(n8, 256)), dim3(256), 0, stream, codes, n8, scales, n_scales, seed,
             uint32_t(scale_lo), uint32_t(scale_hi - scale_lo + 1));
  STRIKER_CUDA_CHECK_LAUNCH("nvfp4_fill_random");
}

}  // namespace striker::cuda
