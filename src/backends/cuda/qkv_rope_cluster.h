// The attention front of a decode step in ONE launch: q|k|v = bf16(mm(x, Wqkv)) (gemv.h) followed
// by the per-head q/k RMSNorm, RoPE and paged-KV-cache write of qk_rope_kv.h, bit-identical to
// gemv_bf16 + qk_norm_rope_kv_write (DecodeTweaks::qkv_rope_cluster); NVFP4 weights as well.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/nvfp4_linear.h"
#include "backends/cuda/qk_rope_kv.h"
#include "core/bf16.h"

namespace striker::cuda {

// Tokens one launch handles (one token per CTA of a cluster in the per-head tail).
inline constexpr int kQkvClusterMaxTokens = 8;

// x [T, in] (T in 1..kQkvClusterMaxTokens), Wqkv [(n_heads + 2 n_kv) * d, in] row-major bf16 (rows
// of q heads, then k heads, then v heads; in % 8 == 0, 16-byte aligned). The other arguments and
// the outputs are those of qk_norm_rope_kv_write; the qkv activations are not written.
// Throws striker::Error for T outside 1..8, an unsupported head_dim (32, 64, 128) or a bad shape.
void qkv_rope_kv_cluster(const bf16* x, int T, int in, const bf16* Wqkv, const HeadShape& hs, const float* q_norm_w,
                         const float* k_norm_w, float eps, const int32_t* positions, const float* inv_freq,
                         const int64_t* slots, int block_size, bf16* k_cache, bf16* v_cache, bf16* q_out,
                         cudaStream_t stream);

// The same with NVFP4 weights (nvfp4_linear.h; in % 64 == 0): bit-identical to nvfp4_gemv (scale2
// by row on the fp32 dot product) + qk_norm_rope_kv_write. Its weights' first chunks are loaded
// before the PDL wait, as with Nvfp4DecodeVariant::nvfp4_early_weights (same sums either way).
void qkv_rope_kv_cluster_nvfp4(const bf16* x, int T, int in, Nvfp4Matrix Wqkv, RowScale2 scale2, const HeadShape& hs,
                               const float* q_norm_w, const float* k_norm_w, float eps, const int32_t* positions,
                               const float* inv_freq, const int64_t* slots, int block_size, bf16* k_cache,
                               bf16* v_cache, bf16* q_out, cudaStream_t stream);

}  // namespace striker::cuda
