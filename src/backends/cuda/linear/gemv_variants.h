// The decode projections with their kernel family chosen by the caller — for the kernel
// benchmarks and GPU tests only (issue 11's H200 A/B), never for production: gemv.h and
// nvfp4_linear.h take the tensor-core skinny kernels (skinny_mma.cuh) from 2 tokens on and the
// CUDA-core kernels at 1 token. Here either family serves any T, so both can be timed at every
// token count; the losing kernels are deleted once the numbers are in. Same contracts as the
// functions without the suffix.
#pragma once
#include <cuda_runtime_api.h>

#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "core/bf16.h"

namespace striker::cuda {

enum class DecodeKernels { CudaCores, TensorCores };

void gemv_bf16_using(DecodeKernels k, const bf16* x, int T, int in, const bf16* W, int out_dim, bf16* out,
                     cudaStream_t stream);
void gemv_residual_using(DecodeKernels k, const bf16* x, int T, int in, const bf16* W, int out_dim, bf16* h,
                         cudaStream_t stream);
void gemv_logits_using(DecodeKernels k, const bf16* x, int T, int in, const bf16* W, int out_dim, float* logits,
                       cudaStream_t stream);
void gemv_gate_up_using(DecodeKernels k, const bf16* x, int T, int in, const bf16* Wg, const bf16* Wu, int inter,
                        bf16* act, cudaStream_t stream);

void nvfp4_gemv_using(DecodeKernels k, const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2, int out_dim,
                      bf16* out, cudaStream_t stream);
void nvfp4_gemv_residual_using(DecodeKernels k, const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2,
                               int out_dim, bf16* h, cudaStream_t stream);
void nvfp4_gemv_logits_using(DecodeKernels k, const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2,
                             int out_dim, float* logits, cudaStream_t stream);
void nvfp4_gemv_gate_up_using(DecodeKernels k, const bf16* x, int T, int in, Nvfp4Matrix Wg, float scale2_g,
                              Nvfp4Matrix Wu, float scale2_u, int inter, bf16* act, cudaStream_t stream);

}  // namespace striker::cuda
