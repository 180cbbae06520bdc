// Small elementwise steps of the prefill path (where projections go through cuBLASLt):
// the SwiGLU product and the residual add, with FLINT.md §4 rounding.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "core/bf16.h"

namespace striker::cuda {

// act = bf16(bf16(g·sigmoid(g))·u) elementwise; g, u already bf16 (rounded projections).
void swiglu_act(const bf16* g, const bf16* u, bf16* act, int64_t n, cudaStream_t stream);
// h = bf16(h + y) elementwise.
void residual_add(bf16* h, const bf16* y, int64_t n, cudaStream_t stream);
// Fills n bf16 values with a deterministic pseudo-random uniform distribution of standard
// deviation `std` around `mean` (dummy weights; never zeros).
void fill_random_bf16(bf16* out, int64_t n, uint64_t seed, float mean, float std, cudaStream_t stream);
void fill_random_f32(float* out, int64_t n, uint64_t seed, float mean, float std, cudaStream_t stream);

// out[i] = float(in[i]) (logits of the prefill LM head).
void bf16_to_f32(const bf16* in, float* out, int64_t n, cudaStream_t stream);

void swiglu_act_ref(const std::vector<bf16>& g, const std::vector<bf16>& u, std::vector<bf16>& act);

}  // namespace striker::cuda
