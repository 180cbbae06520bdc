// QKV projection + attention front in one launch (qkv_front.h): the skinny / NVFP4 GEMV kernels'
// row loops (skinny_bf16.cuh, nvfp4_skinny.cuh, nvfp4_gemv.cuh) with the head epilogue of
// qkv_front.cuh. A CTA's rows are `rows per CTA` consecutive rows of one head, so the CTAs of a
// head are consecutive in x and form one cluster (grid.x is a multiple of the cluster size).
#include "backends/cuda/attention/qkv_front.h"

#include <string>

#include "backends/cuda/attention/qkv_front.cuh"
#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/linear/skinny_bf16.cuh"
#include "backends/cuda/nvfp4/nvfp4_gemv.cuh"
#include "backends/cuda/nvfp4/nvfp4_skinny.cuh"

namespace striker::cuda {
namespace {

using front::FrontArgs;
using front::head_finish;
using front::head_prepare;
using front::head_put;
using front::head_started;
using front::HeadBuffer;
using front::kFrontHeadDim;

// Skinny tensor-core form (BF16 at every T, NVFP4 from 2 tokens): S warps per 16-row tile, so
// 128 / S rows per CTA and S CTAs per head. kU-deep rings as the dense launches of the same shape.
constexpr int kU = 4;
template <int S>
constexpr int skinny_rows_per_cta() { return 16 * (kSkinnyWarps / S); }

template <int S>
__global__ void __launch_bounds__(kSkinnyWarps * 32, 3)
    qkv_front_bf16_kernel(const bf16_t* __restrict__ x, int in_, const bf16_t* __restrict__ W, int rows, int T,
                          FrontArgs a) {
  pdl_launch_dependents();  // see launch.cuh
  __shared__ __align__(16) HeadBuffer buf;
  const SkinnyTokens wk = skinny_tokens(T, (threadIdx.x & 31) >> 2);
  const int head = int(blockIdx.x) * skinny_rows_per_cta<S>() / kFrontHeadDim;
  head_prepare(buf, a, head, wk.out_row0, wk.nt);
  const SkinnyAcc acc = skinny_bf16_acc<S, kU, SkinnyTile::Gemv>(x, in_, W, W, rows, wk, [] {});
  head_started();
  skinny_reduce<S, SkinnyTile::Gemv>(acc, wk.nt, rows, [&](int tok, int o, int r, auto row_sum) {
    head_put(buf, a, rows, wk.out_row0, tok, o, round_bf16(row_sum(r)));  // gemv_bf16's value
  });
  head_finish(buf, a, head, wk.out_row0, wk.nt);
}

template <int S>
__global__ void __launch_bounds__(kSkinnyWarps * 32, 2)
    qkv_front_nvfp4_skinny_kernel(const bf16_t* __restrict__ x, int in_, Nvfp4Matrix W, RowScale2 s2, int rows, int T,
                                  FrontArgs a) {
  pdl_launch_dependents();  // see launch.cuh
  __shared__ __align__(16) HeadBuffer buf;
  const SkinnyTokens wk = skinny_tokens(T, (threadIdx.x & 31) >> 2);
  const int head = int(blockIdx.x) * skinny_rows_per_cta<S>() / kFrontHeadDim;
  head_prepare(buf, a, head, wk.out_row0, wk.nt);
  const SkinnyAcc acc = nvfp4_skinny_acc<S, kU, SkinnyTile::Gemv>(x, in_, W, W, rows, wk, [] {});
  head_started();
  skinny_reduce<S, SkinnyTile::Gemv>(acc, wk.nt, rows, [&](int tok, int o, int r, auto row_sum) {
    head_put(buf, a, rows, wk.out_row0, tok, o, round_bf16(row_sum(r) * s2.at(o)));  // nvfp4_gemv's value
  });
  head_finish(buf, a, head, wk.out_row0, wk.nt);
}

// NVFP4 at one token: nvfp4_gemv's CUDA-core kernel without split-K (8 warps × 2 rows = 16 rows
// per CTA, 8 CTAs per head), 3 CTAs per SM as nvfp4_gemv_kernel at T = 1.
constexpr int kNvfp4RowsPerCta = 2 * kNvfp4GemvWarps;
__global__ void __launch_bounds__(kNvfp4GemvWarps * 32, 3)
    qkv_front_nvfp4_gemv_kernel(const bf16_t* __restrict__ x, int in, const uint8_t* __restrict__ codes,
                                const uint8_t* __restrict__ scales, RowScale2 s2, int rows, FrontArgs a) {
  pdl_launch_dependents();  // see launch.cuh
  __shared__ __align__(16) HeadBuffer buf;
  const int head = int(blockIdx.x) * kNvfp4RowsPerCta / kFrontHeadDim;
  head_prepare(buf, a, head, 0, 1);
  nvfp4_gemv_rows<2, 1, 1>(x, 1, in, codes, scales, s2, rows, [] { head_started(); },
                           [&](int t, int o, float y) { head_put(buf, a, rows, 0, t, o, y); });
  head_finish(buf, a, head, 0, 1);
}

FrontArgs device_args(const AttentionFront& f, bf16* qkv_out) {
  return FrontArgs{f.heads.n_heads,
                   f.heads.n_kv_heads,
                   f.q_norm_w,
                   f.k_norm_w,
                   f.eps,
                   f.positions,
                   f.inv_freq,
                   f.slots,
                   f.block_size,
                   reinterpret_cast<bf16_t*>(f.k_cache),
                   reinterpret_cast<bf16_t*>(f.v_cache),
                   reinterpret_cast<bf16_t*>(f.q_out),
                   reinterpret_cast<bf16_t*>(qkv_out)};
}

bool misaligned(const void* p, unsigned bytes) { return reinterpret_cast<uintptr_t>(p) % bytes != 0; }

// Rows of the projection; throws for a step or shape the kernels are not built for.
int check_front(const char* what, int T, int in, int in_multiple, const AttentionFront& f) {
  if (!qkv_front_supported(T, f.heads))
    throw Error(std::string(what) + ": " + std::to_string(T) + " tokens, head_dim " +
                std::to_string(f.heads.head_dim) + " (built for 1.." + std::to_string(kQkvFrontMaxTokens) +
                " tokens and head_dim 128)");
  if (in <= 0 || in % in_multiple != 0)
    throw Error(std::string(what) + ": input width " + std::to_string(in) + " is not a positive multiple of " +
                std::to_string(in_multiple));
  return (f.heads.n_heads + 2 * f.heads.n_kv_heads) * f.heads.head_dim;
}

// Calls launch(S) with the skinny split S (1, 2, 4 or 8) as a std::integral_constant.
template <typename Launch>
void by_split(int S, Launch launch) {
  if (S == 1) launch(std::integral_constant<int, 1>{});
  else if (S == 2) launch(std::integral_constant<int, 2>{});
  else if (S == 4) launch(std::integral_constant<int, 4>{});
  else launch(std::integral_constant<int, 8>{});
}

}  // namespace

bool qkv_front_supported(int T, const HeadShape& hs) {
  return T >= 1 && T <= kQkvFrontMaxTokens && hs.head_dim == kFrontHeadDim && hs.n_heads > 0 && hs.n_kv_heads > 0;
}

void qkv_front_bf16(const bf16* x, int T, int in, const bf16* W, const AttentionFront& f, bf16* qkv_out,
                    cudaStream_t stream) {
  const int rows = check_front("qkv_front_bf16", T, in, 8, f);
  if (misaligned(x, 16) || misaligned(W, 16)) throw Error("qkv_front_bf16: x and W must be 16-byte aligned");
  const auto* xd = reinterpret_cast<const bf16_t*>(x);
  const auto* Wd = reinterpret_cast<const bf16_t*>(W);
  const int S = skinny_split((in + 31) / 32, 4);
  by_split(S, [&](auto s) {
    constexpr int kS = decltype(s)::value;
    launch_pdl_cluster(qkv_front_bf16_kernel<kS>, dim3(unsigned(rows / skinny_rows_per_cta<kS>()), 1u),
                       dim3(kSkinnyWarps * 32), 0, kFrontHeadDim / skinny_rows_per_cta<kS>(), stream, xd, in, Wd,
                       rows, T, device_args(f, qkv_out));
  });
  STRIKER_CUDA_CHECK_LAUNCH("qkv_front_bf16");
}

void qkv_front_nvfp4(const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2, const AttentionFront& f,
                     bf16* qkv_out, cudaStream_t stream) {
  const int rows = check_front("qkv_front_nvfp4", T, in, 64, f);
  if (misaligned(x, 16) || misaligned(W.codes, 16) || misaligned(W.scales, 4))
    throw Error("qkv_front_nvfp4: x and codes must be 16-byte, scales 4-byte aligned");
  const auto* xd = reinterpret_cast<const bf16_t*>(x);
  if (T == 1) {  // the CUDA-core kernel, as nvfp4_gemv at one token
    launch_pdl_cluster(qkv_front_nvfp4_gemv_kernel, dim3(unsigned(rows / kNvfp4RowsPerCta), 1u),
                       dim3(kNvfp4GemvWarps * 32), 0, kFrontHeadDim / kNvfp4RowsPerCta, stream, xd, in, W.codes,
                       W.scales, scale2, rows, device_args(f, qkv_out));
  } else {
    const int S = skinny_split((in + 127) / 128, 4);
    by_split(S, [&](auto s) {
      constexpr int kS = decltype(s)::value;
      launch_pdl_cluster(qkv_front_nvfp4_skinny_kernel<kS>, dim3(unsigned(rows / skinny_rows_per_cta<kS>()), 1u),
                         dim3(kSkinnyWarps * 32), 0, kFrontHeadDim / skinny_rows_per_cta<kS>(), stream, xd, in, W,
                         scale2, rows, T, device_args(f, qkv_out));
    });
  }
  STRIKER_CUDA_CHECK_LAUNCH("qkv_front_nvfp4");
}

}  // namespace striker::cuda
