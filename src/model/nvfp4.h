// NVFP4 weights (FLINT.md §3, reference/formats.md §3–§4): 4-bit E2M1 codes, one UE4M3 scale
// byte per 16 weights, and a global F32 scale2 per tensor (or per expert).
//
// Two byte layouts of the same numbers exist:
//  - ggml/GGUF blocks: 36 bytes per 64 weights of a row: 4 scale bytes, then 32 code bytes where
//    byte 4+8s+j holds weight 16s+j (low nibble) and 16s+j+8 (high nibble).
//  - "split" (NVIDIA/ModelOpt) layout, what our kernels read: codes [rows, in/2] with weight 2k
//    in the low and 2k+1 in the high nibble of byte k, and scales [rows, in/16].
// Conversion between them is lossless in both directions.
#pragma once
#include <cstddef>
#include <cstdint>

namespace striker::nvfp4 {

inline constexpr int64_t kBlockWeights = 64;   // weights per ggml block
inline constexpr int64_t kBlockBytes = 36;     // bytes per ggml block
inline constexpr int64_t kGroup = 16;          // weights per scale byte

// E2M1 code (bit 3 = sign) -> {0, .5, 1, 1.5, 2, 3, 4, 6} with sign. Code 8 (-0) -> -0.0.
float e2m1_value(uint8_t code);

// UE4M3 scale byte -> value, as ggml/gguf-py decode it: bit 7 ignored, 0x00 and 0x7F -> 0,
// exponent bias 7, subnormals man·2^-9. 0x38 -> 1, 0x7E -> 448.
float ue4m3_value(uint8_t byte);

// Nearest UE4M3 byte for a non-negative value (ggml_fp32_to_ue4m3 rounding; clamps to 448).
uint8_t ue4m3_from_float(float x);

// Bytes of one row of `in` weights in either layout (in % 64 == 0).
inline int64_t ggml_row_bytes(int64_t in) { return in / kBlockWeights * kBlockBytes; }

// ggml blocks of one row -> split layout (codes: in/2 bytes, scales: in/16 bytes).
void ggml_row_to_split(const uint8_t* blocks, int64_t in, uint8_t* codes, uint8_t* scales);
// The inverse.
void split_row_to_ggml(const uint8_t* codes, const uint8_t* scales, int64_t in, uint8_t* blocks);

// One row of ggml blocks -> float weights E2M1·E4M3·scale2 (exact in fp32 before scale2).
void dequantize_ggml_row(const uint8_t* blocks, int64_t in, float scale2, float* out);

// Index of the E2M1 code nearest to v/d, the first minimum of |e2m1(c)·d − v| over c = 0..15 as
// ggml's best_index finds it, without trying all 16 codes.
uint8_t nearest_code(float v, float d);

// Quantises one row of `in` weights that were divided by scale2 already, ggml's reference
// algorithm: per 16 weights, scale byte = ue4m3(amax/6), each weight -> nearest code (first
// minimum on ties). Writes ggml blocks.
void quantize_row_to_ggml(const float* x, int64_t in, uint8_t* blocks);

// Random NVFP4 weights (--load-format dummy): codes uniform over all 16 E2M1 codes, scale bytes
// uniform in [scale_lo, scale_hi], times scale2. Their std is sqrt(E[e2m1²]·E[ue4m3²])·scale2
// (independent, zero-mean codes); random_weight_scale picks scale2 so that std = target_std.
struct RandomScale {
  uint8_t scale_lo = 0, scale_hi = 0;
  float scale2 = 1.0f;
};
RandomScale random_weight_scale(float target_std);

// The global scale NVIDIA's recipe uses: amax / (6 · 448), so every scale byte fits; 1 for 0.
float global_scale_for_amax(float amax);

}  // namespace striker::nvfp4
