// NVFP4 weight-only (W4A16) linear layers on the GPU (FLINT.md §3–§4).
//
// Device layout = the loader's "split" layout (model/nvfp4.h), used as is, no re-pack:
//   codes  [rows, in/2]  byte k of a row holds weight 2k (low nibble) and 2k+1 (high nibble)
//   scales [rows, in/16] one UE4M3 byte per 16 consecutive weights of a row, canonical (no 0x7F:
//                        nvfp4_scales.h; the tensor-core kernels rely on it)
//   scale2               global F32 scale, multiplied into the fp32 accumulator before rounding
// in % 64 == 0 (FLINT.md §3), so a row is a whole number of 16-byte code chunks (32 weights,
// 2 scale bytes) and rows stay 16-byte aligned when the base pointer is.
//
// Decode (T <= 64 tokens, ops_linear.cpp): GEMV kernels stream the codes with 16-byte loads, decode
// E2M1 and E4M3 with bit tricks (no tables), sum each 16-weight group in fp32, multiply by its scale,
// and multiply the row's dot product by scale2 before the bf16 rounding of FLINT.md §4 (from 2 tokens
// on tensor cores, nvfp4_skinny.cuh, each group of 8 tokens decoding the codes again).
// Longer steps: nvfp4_dequantize writes E2M1·E4M3 as bf16 (exact), and cuBLASLt runs with alpha = scale2.
#pragma once
#include <cuda_runtime_api.h>

#include <climits>
#include <cstdint>
#include <vector>

#include "core/bf16.h"

#include "backends/cuda/common/host_device.h"
#include "backends/cuda/elementwise/rmsnorm.h"

namespace striker::cuda {

// One NVFP4 matrix in the split layout (device pointers).
struct Nvfp4Matrix {
  const uint8_t* codes = nullptr;   // [rows, in/2]
  const uint8_t* scales = nullptr;  // [rows, in/16]
};

// scale2 by output row: rows [0, end0) use s[0], [end0, end1) s[1], the rest s[2]. q, k and v
// are three tensors with three global scales; this lets their concatenation q|k|v stay one
// matrix read by one launch (the scale is picked per row, after the dot product).
struct RowScale2 {
  int end0 = INT_MAX, end1 = INT_MAX;
  float s[3] = {1.f, 1.f, 1.f};
  static RowScale2 uniform(float v) { return RowScale2{INT_MAX, INT_MAX, {v, v, v}}; }
  STRIKER_HOST_DEVICE float at(int row) const { return row < end0 ? s[0] : row < end1 ? s[1] : s[2]; }
  // First row >= `row` where the scale changes (INT_MAX when none).
  int next_boundary(int row) const { return row < end0 ? end0 : row < end1 ? end1 : INT_MAX; }
};

// The decode kernels (GEMV, dense gate/up, the MoE gate/up's shared-expert slots) issue each
// warp's first two code/scale chunks between griddepcontrol.launch_dependents and .wait (weights
// only; activations, h and routing ids after the wait), then keep two chunks in flight.
// `norm` (gemv, gate/up; one token only): x is h and every CTA forms x = rmsnorm(h) itself, as
// gemv.h's (the rmsnorm kernel's bits; checked: in <= 2048, aligned gamma). Not the LM head: its
// 9,472 CTAs at 3 per SM would each pay the norm (measured slower than a separate norm launch).
// From 2 tokens these run on the skinny MMA kernels (nvfp4_skinny.cuh), 8 tokens per MMA column
// group; from this many tokens a CTA takes two groups, each decoded weight fragment feeding both
// groups' MMAs (the codes decoded once per 16 tokens, not per 8). Every group keeps the bits it has
// alone. Measured (H100, session 33, NVFP4 steps at 1K context, device ms, one group -> two): 9 seqs
// 6.76 -> 7.00, 12 7.63 -> 7.79, 16 8.68 -> 8.71 (half the CTAs cost more than the decode saves),
// 24 11.27 -> 11.18, 32 12.85 -> 12.50, 64 17.90 -> 17.32.
constexpr int kNvfp4SkinnyTwoGroupsMinTokens = 24;
// A launch whose one-group grid has at least this many CTAs per token group (the LM head: 4,736)
// takes two groups from 9 tokens: its grid stays many waves, and its codes (175 MB for Flint's) are
// read and decoded once per 16 tokens. Measured (H100, session 34, NVFP4 steps at 1K context, device
// ms): 9 seqs 6.507 -> 6.422, 12 7.289 -> 7.229, 16 8.236 -> 8.173.
constexpr int kNvfp4SkinnyWideGridMinCtas = 1024;
// out[t,o] = bf16(scale2(o) · Σ_i x[t,i]·W[o,i]).  x [T, in] bf16, out [T, out_dim].
void nvfp4_gemv(const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2, int out_dim, bf16* out,
                cudaStream_t stream, const InputNorm* norm = nullptr);
// h[t,o] = bf16(h[t,o] + bf16(mm(x[t], W)[o]))  (o_proj / dense down with the residual add fused).
void nvfp4_gemv_residual(const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2, int out_dim, bf16* h,
                         cudaStream_t stream);
// logits[t,o] = float(bf16(mm(x[t], W)[o]))  (LM head).
void nvfp4_gemv_logits(const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2, int out_dim, float* logits,
                       cudaStream_t stream);
// act = bf16(bf16(g·sigmoid(g))·u) with g = bf16(mm(x,Wg)), u = bf16(mm(x,Wu)); Wg, Wu [inter, in].
void nvfp4_gemv_gate_up(const bf16* x, int T, int in, Nvfp4Matrix Wg, float scale2_g, Nvfp4Matrix Wu,
                        float scale2_u, int inter, bf16* act, cudaStream_t stream, const InputNorm* norm = nullptr);

// out[r, i] = bf16(E2M1(code)·E4M3(scale)) for `rows` rows of `in` weights (no scale2: the
// caller applies it to the GEMM accumulator). Exact, see nvfp4_gemv.cu.
void nvfp4_dequantize(Nvfp4Matrix W, int64_t rows, int in, bf16* out, cudaStream_t stream);

// Random NVFP4 weights for --load-format dummy: codes uniform over all 16 E2M1 codes, scale
// bytes uniform in [scale_lo, scale_hi] (see nvfp4::random_weight_scale2 for the std), canonical
// (nvfp4_scales.h).
void nvfp4_fill_random(uint8_t* codes, uint8_t* scales, int64_t rows, int in, uint64_t seed, uint8_t scale_lo,
                       uint8_t scale_hi, cudaStream_t stream);

// CPU references (model/nvfp4 codec, double accumulation).
// Host copy of one split-layout matrix.
struct Nvfp4HostMatrix {
  std::vector<uint8_t> codes, scales;
};
// E2M1·E4M3 values (no scale2) as floats, [rows, in].
std::vector<float> nvfp4_dequantize_ref(const Nvfp4HostMatrix& W, int64_t rows, int in);
// dot[t,o] = scale2(o)·Σ x·W (unrounded fp32 of a double sum).
void nvfp4_gemv_ref(const std::vector<bf16>& x, int T, int in, const Nvfp4HostMatrix& W, RowScale2 scale2,
                    int out_dim, std::vector<float>& dot);
void nvfp4_gate_up_ref(const std::vector<bf16>& x, int T, int in, const Nvfp4HostMatrix& Wg, float scale2_g,
                       const Nvfp4HostMatrix& Wu, float scale2_u, int inter, std::vector<bf16>& act);

}  // namespace striker::cuda
