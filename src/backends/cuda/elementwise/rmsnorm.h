// RMSNorm with FLINT.md §4 rounding: r = 1/sqrt(mean(x^2)+eps); y_i = bf16(bf16(x_i*r) * w_i).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "core/bf16.h"

namespace striker::cuda {

// An RMSNorm that a kernel applies to the rows it has just written (FLINT.md §4 rounding, the
// rmsnorm kernel's bits): weights [hidden] fp32, eps, and where the normalised rows go.
struct RowNorm {
  const float* gamma = nullptr;
  float eps = 0.f;
  bf16* out = nullptr;
};

// An RMSNorm that a kernel applies to its input row before using it (the 1-token GEMVs: x =
// rmsnorm(h) formed in every CTA, the rmsnorm kernel's bits; gemv.h, nvfp4_linear.h).
struct InputNorm {
  const float* gamma = nullptr;  // [hidden] fp32, 16-byte aligned
  float eps = 0.f;
};
// Throws striker::Error unless a kernel can take `norm` in front: one token, hidden % 8 == 0 and
// <= 2048 (one 8-value chunk per thread of a 256-thread block), gamma set and 16-byte aligned.
void check_input_norm(const char* what, const InputNorm& norm, int T, int hidden);

// x, out: [rows, hidden] bf16; w: [hidden] fp32 (norm weights are kept in fp32 on the device so
// an F32 checkpoint weight is used exactly). x and out may alias.
void rmsnorm(const bf16* x, const float* w, bf16* out, int rows, int hidden, float eps, cudaStream_t stream);

// Residual add fused in front: h = bf16(h + delta); out = rmsnorm(h, w). h is updated in place.
void add_rmsnorm(bf16* h, const bf16* delta, const float* w, bf16* out, int rows, int hidden, float eps,
                 cudaStream_t stream);

// CPU references (same contracts; delta may be empty for the plain norm).
void rmsnorm_ref(const std::vector<bf16>& x, const std::vector<float>& w, std::vector<bf16>& out, int rows,
                 int hidden, float eps);
void add_rmsnorm_ref(std::vector<bf16>& h, const std::vector<bf16>& delta, const std::vector<float>& w,
                     std::vector<bf16>& out, int rows, int hidden, float eps);

}  // namespace striker::cuda
