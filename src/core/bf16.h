// bfloat16 storage type and the exact conversions FLINT.md §4 relies on.
// bf16(x) rounds to nearest-even; NaN stays NaN (quiet).
#pragma once
#include <cstdint>
#include <cstring>

namespace striker {

struct bf16 {
  uint16_t bits = 0;
};

inline float bf16_to_float(bf16 v) {
  uint32_t u = uint32_t(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline bf16 float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40)};  // quiet NaN
  uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);
  return bf16{uint16_t((u + rounding_bias) >> 16)};
}

// bf16(x) of FLINT.md: round an fp32 value to the nearest bf16 and back.
inline float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

// IEEE half -> float (for F16 checkpoint tensors).
float f16_to_float(uint16_t h);
uint16_t float_to_f16(float f);

}  // namespace striker
