// The CUDA-core decode kernels as they served 2..8 tokens before the tensor-core skinny kernels
// (skinny_mma.cuh, issue 11): BF16 here, NVFP4 in nvfp4/nvfp4_linear.h's twins below. Reachable
// from the kernel benchmarks and GPU tests only, for the H200 A/B; production calls gemv.h /
// nvfp4_linear.h, and the losing kernels are deleted once the numbers are in. Same contracts as
// the functions without the suffix (T = 1 takes the same kernel either way).
#pragma once
#include <cuda_runtime_api.h>

#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "core/bf16.h"

namespace striker::cuda {

void gemv_bf16_cuda_core(const bf16* x, int T, int in, const bf16* W, int out_dim, bf16* out, cudaStream_t stream);
void gemv_residual_cuda_core(const bf16* x, int T, int in, const bf16* W, int out_dim, bf16* h, cudaStream_t stream);
void gemv_logits_cuda_core(const bf16* x, int T, int in, const bf16* W, int out_dim, float* logits,
                           cudaStream_t stream);
void gemv_gate_up_cuda_core(const bf16* x, int T, int in, const bf16* Wg, const bf16* Wu, int inter, bf16* act,
                            cudaStream_t stream);

void nvfp4_gemv_cuda_core(const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2, int out_dim, bf16* out,
                          cudaStream_t stream);
void nvfp4_gemv_residual_cuda_core(const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2, int out_dim,
                                   bf16* h, cudaStream_t stream);
void nvfp4_gemv_logits_cuda_core(const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2, int out_dim,
                                 float* logits, cudaStream_t stream);
void nvfp4_gemv_gate_up_cuda_core(const bf16* x, int T, int in, Nvfp4Matrix Wg, float scale2_g, Nvfp4Matrix Wu,
                                  float scale2_u, int inter, bf16* act, cudaStream_t stream);

}  // namespace striker::cuda
