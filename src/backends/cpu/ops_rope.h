// rope of FLINT.md §4 (rotate-half pairs (i, i + d/2)), used on sliding layers only.
#pragma once
#include <cstdint>
#include <vector>

namespace striker::cpu {

// The bf16 cos/sin of one position: c[i], s[i] for i < d/2.
struct RopeAngles {
  std::vector<float> cos, sin;
};

// θ_i = theta^(-2i/d) rounded to fp32, φ = fp32(p)·θ_i in fp32, then cos/sin evaluated in
// double (accurate for p up to 262143) and rounded to bf16.
RopeAngles rope_angles(int64_t position, int64_t head_dim, float theta);

// Rotates `heads` consecutive heads of x[heads · d] in place.
void apply_rope(float* x, int64_t heads, int64_t head_dim, const RopeAngles& a);

}  // namespace striker::cpu
