// Bandwidth-bound BF16 matrix-vector products for decode (a few tokens): y[t,o] = Σ_i x[t,i]·W[o,i]
// with fp32 accumulation (FLINT.md §4 mm). W is [out, in] row-major, read once with 16-byte loads
// and shared by up to 8 tokens per pass. Requires in % 8 == 0 and 16-byte aligned pointers
// (checked: a violation throws striker::Error).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "core/bf16.h"

#include "backends/cuda/elementwise/rmsnorm.h"

namespace striker::cuda {

// `norm` (Store, Logits, gate/up; one token only): x is h and the kernel's CTAs form x = rmsnorm(h)
// themselves, the rmsnorm kernel's bits (rmsnorm_row.cuh block_rmsnorm_row), so no separate
// rmsnorm launch runs in front; in <= 2048 and 16-byte aligned gamma (checked, throws).
// out[t,o] = bf16(mm(x[t], W)[o]).  x [T, in], out [T, out_dim].
void gemv_bf16(const bf16* x, int T, int in, const bf16* W, int out_dim, bf16* out, cudaStream_t stream,
               const InputNorm* norm = nullptr);
// h[t,o] = bf16(h[t,o] + bf16(mm(x[t], W)[o]))  (o_proj and dense down_proj with the residual add fused).
void gemv_residual(const bf16* x, int T, int in, const bf16* W, int out_dim, bf16* h, cudaStream_t stream);
// logits[t,o] = float(bf16(mm(x[t], W)[o]))  (LM head; sampling reads fp32).
void gemv_logits(const bf16* x, int T, int in, const bf16* W, int out_dim, float* logits, cudaStream_t stream,
                 const InputNorm* norm = nullptr);
// SwiGLU front half: g = bf16(mm(x,Wg)); u = bf16(mm(x,Wu)); act = bf16(bf16(g·sigmoid(g))·u).
// Wg, Wu [inter, in]; act [T, inter].
void gemv_gate_up(const bf16* x, int T, int in, const bf16* Wg, const bf16* Wu, int inter, bf16* act,
                  cudaStream_t stream, const InputNorm* norm = nullptr);

// CPU references (double accumulation, then the same rounding points).
void gemv_ref(const std::vector<bf16>& x, int T, int in, const std::vector<bf16>& W, int out_dim,
              std::vector<float>& dot);  // unrounded dot products [T, out_dim]
void gate_up_ref(const std::vector<bf16>& x, int T, int in, const std::vector<bf16>& Wg,
                 const std::vector<bf16>& Wu, int inter, std::vector<bf16>& act);

}  // namespace striker::cuda
