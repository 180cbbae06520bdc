// Bandwidth-bound BF16 matrix-vector products for decode (a few tokens): y[t,o] = Σ_i x[t,i]·W[o,i]
// with fp32 accumulation (FLINT.md §4 mm). W is [out, in] row-major, read once with 16-byte loads
// and shared by up to 8 tokens per pass. Requires in % 8 == 0 and 16-byte aligned pointers
// (checked: a violation throws striker::Error).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/rmsnorm.h"
#include "core/bf16.h"

namespace striker::cuda {

// early_weights (DecodeTweaks::early_weights): each lane's first weight chunks are loaded before
// the PDL wait, overlapping the previous kernel's tail. Results are bit-identical either way.

// out[t,o] = bf16(mm(x[t], W)[o]).  x [T, in], out [T, out_dim].
void gemv_bf16(const bf16* x, int T, int in, const bf16* W, int out_dim, bf16* out, cudaStream_t stream,
               bool early_weights = false);
// h[t,o] = bf16(h[t,o] + bf16(mm(x[t], W)[o]))  (o_proj and dense down_proj with the residual add fused).
void gemv_residual(const bf16* x, int T, int in, const bf16* W, int out_dim, bf16* h, cudaStream_t stream,
                   bool early_weights = false);
// logits[t,o] = float(bf16(mm(x[t], W)[o]))  (LM head; sampling reads fp32).
void gemv_logits(const bf16* x, int T, int in, const bf16* W, int out_dim, float* logits, cudaStream_t stream,
                 bool early_weights = false);
// SwiGLU front half: g = bf16(mm(x,Wg)); u = bf16(mm(x,Wu)); act = bf16(bf16(g·sigmoid(g))·u).
// Wg, Wu [inter, in]; act [T, inter]. early_weights applies to T == 1 only (register pressure).
void gemv_gate_up(const bf16* x, int T, int in, const bf16* Wg, const bf16* Wu, int inter, bf16* act,
                  cudaStream_t stream, bool early_weights = false);
// gemv_bf16 of x = rmsnorm(h, norm.gamma) without a separate norm launch (DecodeTweaks::fused_norm,
// the qkv projection of a decode step): every block computes x of its tokens from h (L2) into
// shared memory, bit-identical to rmsnorm(); x is not written out (norm.x_out must be null).
// Shared memory holds min(T, 8) rows of x: in <= ~14K.
void gemv_rmsnorm_bf16(const bf16* h, const FusedRmsNorm& norm, int T, int in, const bf16* W, int out_dim, bf16* out,
                       cudaStream_t stream, bool early_weights = false);

// One launch of an empty kernel (pdl_grid_start only) with `blocks` blocks: the benchmark's
// per-launch floor of a chain of dependent PDL launches.
void launch_empty_pdl(int blocks, cudaStream_t stream);

// CPU references (double accumulation, then the same rounding points).
void gemv_ref(const std::vector<bf16>& x, int T, int in, const std::vector<bf16>& W, int out_dim,
              std::vector<float>& dot);  // unrounded dot products [T, out_dim]
void gate_up_ref(const std::vector<bf16>& x, int T, int in, const std::vector<bf16>& Wg,
                 const std::vector<bf16>& Wu, int inter, std::vector<bf16>& act);

}  // namespace striker::cuda
