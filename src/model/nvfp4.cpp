#include "model/nvfp4.h"

#include <cmath>
#include <cstring>

namespace striker::nvfp4 {

namespace {
constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
}

float e2m1_value(uint8_t code) {
  float v = kE2M1[code & 7];
  return (code & 8) ? -v : v;
}

float ue4m3_value(uint8_t byte) {
  if (byte == 0 || byte == 0x7F) return 0.0f;
  int exp = (byte >> 3) & 0xF;
  int man = byte & 7;
  if (exp == 0) return std::ldexp(float(man), -9);
  return std::ldexp(1.0f + float(man) / 8.0f, exp - 7);
}

uint8_t ue4m3_from_float(float x) {
  // Like ggml_fp32_to_ue4m3 (round half up on the mantissa), except that exponent 15 is used:
  // ggml clamps every value in [256, 448) to 448, we keep the nearer grid points 256..416.
  if (!(x > 0.0f)) return 0;  // also NaN
  if (x >= 448.0f) return 0x7E;
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  int exp = int((bits >> 23) & 0xFF) - 127 + 7;
  if (exp <= 0) {  // subnormal: multiples of 2^-9
    int man = int(x * 512.0f + 0.5f);
    if (man > 7) man = 7;  // the rounding can reach the first normal
    return man < 1 ? 0 : uint8_t(man);
  }
  int man = int((bits >> 20) & 7) + int((bits >> 19) & 1);  // round half up
  if (man > 7) {
    man = 0;
    ++exp;
  }
  if (exp > 15) return 0x7E;
  uint8_t b = uint8_t((exp << 3) | man);
  return b == 0x7F ? 0x7E : b;  // 0x7F is NaN; 448 (0x7E) is the largest finite value
}

void ggml_row_to_split(const uint8_t* blocks, int64_t in, uint8_t* codes, uint8_t* scales) {
  for (int64_t b = 0; b < in / kBlockWeights; ++b) {
    const uint8_t* B = blocks + b * kBlockBytes;
    for (int s = 0; s < 4; ++s) {
      scales[b * 4 + s] = B[s];
      uint8_t c[16];
      for (int j = 0; j < 8; ++j) {
        c[j] = B[4 + 8 * s + j] & 0xF;
        c[j + 8] = B[4 + 8 * s + j] >> 4;
      }
      for (int t = 0; t < 8; ++t) codes[b * 32 + 8 * s + t] = uint8_t(c[2 * t] | (c[2 * t + 1] << 4));
    }
  }
}

void split_row_to_ggml(const uint8_t* codes, const uint8_t* scales, int64_t in, uint8_t* blocks) {
  for (int64_t b = 0; b < in / kBlockWeights; ++b) {
    uint8_t* B = blocks + b * kBlockBytes;
    for (int s = 0; s < 4; ++s) {
      B[s] = scales[b * 4 + s];
      uint8_t c[16];
      for (int t = 0; t < 8; ++t) {
        uint8_t byte = codes[b * 32 + 8 * s + t];
        c[2 * t] = byte & 0xF;
        c[2 * t + 1] = byte >> 4;
      }
      for (int j = 0; j < 8; ++j) B[4 + 8 * s + j] = uint8_t(c[j] | (c[j + 8] << 4));
    }
  }
}

void dequantize_ggml_row(const uint8_t* blocks, int64_t in, float scale2, float* out) {
  for (int64_t b = 0; b < in / kBlockWeights; ++b) {
    const uint8_t* B = blocks + b * kBlockBytes;
    float* y = out + b * kBlockWeights;
    for (int s = 0; s < 4; ++s) {
      float d = ue4m3_value(B[s]);
      for (int j = 0; j < 8; ++j) {
        uint8_t q = B[4 + 8 * s + j];
        y[16 * s + j] = e2m1_value(q & 0xF) * d * scale2;
        y[16 * s + j + 8] = e2m1_value(q >> 4) * d * scale2;
      }
    }
  }
}

uint8_t nearest_code(float v, float d) {
  // The exhaustive search (16 codes, |e2m1·d − v| in fp32, first minimum) picks, for v ≥ 0 (and
  // NaN: every comparison false, code 0), a code of 0..7 (a negative code's error is never
  // smaller and comes later); for v < 0 the mirror among 9..15, or 0 for magnitude 0. Along the
  // magnitudes the rounded errors fall up to the last grid point j at or below |v| and rise after,
  // so the minimum is j or j + 1 (j on a tie). Rounding ties between other codes need |v| far
  // beyond the grid's 6·d, or d = 0: those inputs (never made by quantize_row_to_ggml's own scale
  // bytes) take the exhaustive search.
  const float m = std::fabs(v);
  if (!(d > 0.0f) || !(m <= 8.0f * d)) {
    uint8_t best = 0;
    float best_err = INFINITY;
    for (uint8_t c = 0; c < 16; ++c) {
      float err = std::fabs(e2m1_value(c) * d - v);
      if (err < best_err) {
        best_err = err;
        best = c;
      }
    }
    return best;
  }
  int j = 0;
#pragma GCC unroll 7
  for (int k = 1; k < 8; ++k) j += m >= kE2M1[k] * d;
  // Branch-free from here: which side wins is a coin flip on real weights.
  const int up = (j < 7) & (std::fabs(kE2M1[j < 7 ? j + 1 : 7] * d - m) < std::fabs(kE2M1[j] * d - m));
  const int mag = j + up;
  return uint8_t(mag | (((v < 0.0f) & (mag != 0)) << 3));
}

void quantize_row_to_ggml(const float* x, int64_t in, uint8_t* blocks) {
  for (int64_t b = 0; b < in / kBlockWeights; ++b) {
    uint8_t* B = blocks + b * kBlockBytes;
    const float* xb = x + b * kBlockWeights;
    for (int s = 0; s < 4; ++s) {
      float amax = 0.0f;
      for (int j = 0; j < 16; ++j) amax = std::fmax(amax, std::fabs(xb[16 * s + j]));
      uint8_t sb = ue4m3_from_float(amax / 6.0f);
      B[s] = sb;
      float d = ue4m3_value(sb);
      for (int j = 0; j < 8; ++j) {
        uint8_t lo = nearest_code(xb[16 * s + j], d);
        uint8_t hi = nearest_code(xb[16 * s + j + 8], d);
        B[4 + 8 * s + j] = uint8_t(lo | (hi << 4));
      }
    }
  }
}

RandomScale random_weight_scale(float target_std) {
  // Scale bytes 0x30..0x3F are 0.5..1.875: a spread of realistic block scales, all normal.
  RandomScale r;
  r.scale_lo = 0x30;
  r.scale_hi = 0x3F;
  double code_sq = 0, scale_sq = 0;
  for (uint8_t c = 0; c < 16; ++c) code_sq += double(e2m1_value(c)) * e2m1_value(c) / 16.0;
  const int n = r.scale_hi - r.scale_lo + 1;
  for (int b = r.scale_lo; b <= r.scale_hi; ++b)
    scale_sq += double(ue4m3_value(uint8_t(b))) * ue4m3_value(uint8_t(b)) / n;
  r.scale2 = float(double(target_std) / std::sqrt(code_sq * scale_sq));
  return r;
}

float global_scale_for_amax(float amax) { return amax > 0.0f ? amax / (6.0f * 448.0f) : 1.0f; }

}  // namespace striker::nvfp4
