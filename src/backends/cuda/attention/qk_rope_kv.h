// Fused attention front: per-head RMSNorm of q and k (q_norm / k_norm shared across heads),
// RoPE on sliding layers, and the write of k, v into the paged KV cache (FLINT.md §4).
//
// Paged cache layout (one pool per layer kind, one buffer per layer):
//   cache[block][kv_head][slot_in_block][head_dim]  (bf16)
// so one KV head's keys in a block are contiguous for the decode kernel.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "core/bf16.h"

namespace striker::cuda {

struct HeadShape {
  int n_heads = 0;     // query heads
  int n_kv_heads = 0;  // key/value heads
  int head_dim = 0;    // d; a multiple of 32, at most 128
};

// θ_i = theta^(-2i/d) as fp32 (computed in double, rounded once), i < d/2.
std::vector<float> rope_inv_freq(float theta, int head_dim);

// qkv: [T, (n_heads + 2 n_kv) * d] = q | k | v of each token (one fused projection).
// positions[T]: absolute positions. inv_freq: [d/2] on the device, or nullptr for NoPE layers.
// slots[T]: physical cache slot (block * block_size + offset) for each token's k, v.
// q_out: [T, n_heads, d].  Throws striker::Error for an unsupported head_dim.
// The gammas and RoPE cos/sin are computed before the PDL wait (qk_rope_kv.cu says why that is safe).
// Up to 8 tokens one warp per (token, head); more tokens two per CTA, staged in shared memory,
// each token's cos/sin computed once, d/8 lanes per head in 16-byte accesses: the same bits either way.
void qk_norm_rope_kv_write(const bf16* qkv, int T, const HeadShape& hs, const float* q_norm_w,
                           const float* k_norm_w, float eps, const int32_t* positions, const float* inv_freq,
                           const int64_t* slots, int block_size, bf16* k_cache, bf16* v_cache, bf16* q_out,
                           cudaStream_t stream);

// CPU reference; caches are flat host vectors in the layout above.
void qk_norm_rope_kv_write_ref(const std::vector<bf16>& qkv, int T, const HeadShape& hs,
                               const std::vector<float>& q_norm_w, const std::vector<float>& k_norm_w, float eps,
                               const std::vector<int32_t>& positions, const std::vector<float>* inv_freq,
                               const std::vector<int64_t>& slots, int block_size, std::vector<bf16>& k_cache,
                               std::vector<bf16>& v_cache, std::vector<bf16>& q_out);

}  // namespace striker::cuda
