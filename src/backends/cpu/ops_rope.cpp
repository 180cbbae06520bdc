#include "backends/cpu/ops_rope.h"

#include <cmath>
#include <cstring>

#include "core/bf16.h"

namespace striker::cpu {

namespace {

// bf16(x) of a double in one rounding (double -> float -> bf16 could round twice): keep the
// top 7 explicit mantissa bits of the double, nearest-even. |x| <= 1 here, so no overflow.
float round_double_to_bf16(double x) {
  uint64_t u;
  std::memcpy(&u, &x, 8);
  const uint64_t dropped = 52 - 7;
  u += ((uint64_t(1) << (dropped - 1)) - 1) + ((u >> dropped) & 1);
  u &= ~((uint64_t(1) << dropped) - 1);
  double r;
  std::memcpy(&r, &u, 8);
  return float(r);  // exact: r has a bf16 mantissa
}

}  // namespace

RopeAngles rope_angles(int64_t position, int64_t head_dim, float theta) {
  const int64_t half = head_dim / 2;
  RopeAngles a;
  a.cos.resize(size_t(half));
  a.sin.resize(size_t(half));
  for (int64_t i = 0; i < half; ++i) {
    const float inv_freq = float(std::pow(double(theta), -2.0 * double(i) / double(head_dim)));
    const float phi = float(position) * inv_freq;  // fp32 product, as the spec requires
    a.cos[size_t(i)] = round_double_to_bf16(std::cos(double(phi)));
    a.sin[size_t(i)] = round_double_to_bf16(std::sin(double(phi)));
  }
  return a;
}

void apply_rope(float* x, int64_t heads, int64_t head_dim, const RopeAngles& a) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float x1 = v[i], x2 = v[i + half], c = a.cos[size_t(i)], s = a.sin[size_t(i)];
      v[i] = round_bf16(round_bf16(x1 * c) - round_bf16(x2 * s));
      v[i + half] = round_bf16(round_bf16(x2 * c) + round_bf16(x1 * s));
    }
  }
}

}  // namespace striker::cpu
