// The QKV projection of a decode step (1..8 tokens) with the attention front in its epilogue:
// q|k|v = bf16(mm(x, Wqkv)), then per head the RMSNorm of q and k, RoPE on sliding layers, q to
// q_out and k, v into the paged cache — qk_norm_rope_kv_write's math (qk_rope_kv.h), in the same
// launch instead of a second kernel (docs/performance.md, seventh session).
//
// How: the CTAs computing one head's head_dim rows form a thread-block cluster; each writes its
// rows' bf16 values into the shared memory of the cluster's first CTA (distributed shared memory),
// a cluster barrier publishes them, and that CTA's warp t runs the front for token t of the head.
// No global counter, fence or atomic on any CTA's tail. The projection is the skinny tensor-core
// GEMM for BF16 (T = 1 too: it ties the CUDA-core kernel on QKV, docs/performance.md "Decode kernels
// at 1 token"), NVFP4's CUDA-core GEMV at T = 1 and its skinny GEMM from 2 on: the kernels of
// gemv_bf16 / nvfp4_gemv, whose rows of a head fit one cluster (<= 8 CTAs).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/attention/qk_rope_kv.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "core/bf16.h"

namespace striker::cuda {

// qk_norm_rope_kv_write's arguments besides qkv and T (the same meaning).
struct AttentionFront {
  HeadShape heads;
  const float* q_norm_w = nullptr;
  const float* k_norm_w = nullptr;
  float eps = 0.f;
  const int32_t* positions = nullptr;
  const float* inv_freq = nullptr;  // nullptr: NoPE layer
  const int64_t* slots = nullptr;
  int block_size = 0;
  bf16* k_cache = nullptr;
  bf16* v_cache = nullptr;
  bf16* q_out = nullptr;
};

constexpr int kQkvFrontMaxTokens = 8;
// Whether qkv_front_* take this step: 1..8 tokens, head_dim 128.
bool qkv_front_supported(int T, const HeadShape& hs);

// x [T, in]; W [(nh + 2 nkv)·d, in] (BF16, in % 8 == 0) or NVFP4 (in % 64 == 0) with its scale2.
// qkv_out: nullptr, or [T, (nh + 2 nkv)·d] receives the projection too (tests compare it).
// Throws striker::Error for an unsupported step (qkv_front_supported) or misaligned pointers.
void qkv_front_bf16(const bf16* x, int T, int in, const bf16* W, const AttentionFront& f, bf16* qkv_out,
                    cudaStream_t stream);
void qkv_front_nvfp4(const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2, const AttentionFront& f,
                     bf16* qkv_out, cudaStream_t stream);

}  // namespace striker::cuda
