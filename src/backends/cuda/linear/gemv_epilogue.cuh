// What a decode GEMV grid (BF16 gemv.cu, NVFP4 nvfp4_gemv.cu) does after its last store, chosen by
// the type of its epilogue argument: nothing, the RMSNorm of the residual stream it just wrote
// (NormEpilogue, elementwise/rmsnorm.h) or the attention front of the heads it just projected
// (QkvEpilogue, attention/qk_rope_kv.h). The CTA wrote output rows [row0, row0 + rows) for all of
// the step's T tokens. Every thread of every CTA calls it.
#pragma once
#include <string>

#include "backends/cuda/attention/qk_rope_head.cuh"
#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/elementwise/rmsnorm_rows.cuh"

namespace striker::cuda {

struct NoEpilogue {};

__device__ __forceinline__ void gemv_epilogue(const NoEpilogue&, const void*, int, int, int, int) {}

__device__ __forceinline__ void gemv_epilogue(const NormEpilogue& ep, const void* h, int T, int out_dim, int, int) {
  norm_epilogue(ep, static_cast<const bf16_t*>(h), T, out_dim);
}

__device__ __forceinline__ void gemv_epilogue(const QkvEpilogue& ep, const void* qkv, int T, int, int row0, int rows) {
  const auto* q = static_cast<const bf16_t*>(qkv);
  switch (ep.head_dim) {
    case 32: qkv_head_epilogue<1>(ep, q, T, row0, rows); break;
    case 64: qkv_head_epilogue<2>(ep, q, T, row0, rows); break;
    default: qkv_head_epilogue<4>(ep, q, T, row0, rows); break;  // 128 (checked on the host)
  }
}

// Host checks shared by the launchers: an epilogue covers one pass of the grid's tokens, and the
// QKV one needs every CTA's rows inside one head (the GEMVs' 2..32 rows per CTA divide 32).
inline void check_epilogue_tokens(const char* what, bool epilogue, int T, int max_tokens) {
  if (epilogue && T > max_tokens)
    throw Error(std::string(what) + ": a fused epilogue covers at most " + std::to_string(max_tokens) +
                " tokens, got " + std::to_string(T));
}

inline void check_qkv_epilogue(const char* what, const QkvEpilogue& qk, int out_dim) {
  if (qk.counters == nullptr || (qk.head_dim != 32 && qk.head_dim != 64 && qk.head_dim != 128) ||
      out_dim != (qk.n_heads + 2 * qk.n_kv_heads) * qk.head_dim)
    throw Error(std::string(what) + ": bad QKV epilogue (head_dim " + std::to_string(qk.head_dim) + ", " +
                std::to_string(qk.n_heads) + "/" + std::to_string(qk.n_kv_heads) + " heads, out " +
                std::to_string(out_dim) + ", counters " + (qk.counters ? "set" : "missing") + ")");
}

}  // namespace striker::cuda
