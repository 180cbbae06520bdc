// Scale selection for random NVFP4 dummy weights: sampled weights have the requested std.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model/nvfp4.h"

using namespace striker;

TEST(Nvfp4RandomScale, SampledWeightsHaveTheTargetStd) {
  for (float target : {1.0f / 45.25f, 0.2f / 22.6f, 1.0f}) {
    const auto r = nvfp4::random_weight_scale(target);
    ASSERT_LE(r.scale_lo, r.scale_hi);
    ASSERT_LT(r.scale_hi, 0x7F) << "0x7F is the NaN scale byte";
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> code(0, 15), scale(r.scale_lo, r.scale_hi);
    double sum = 0, sq = 0;
    const int n = 400000;
    for (int i = 0; i < n; ++i) {
      const double w = double(nvfp4::e2m1_value(uint8_t(code(rng)))) *
                       nvfp4::ue4m3_value(uint8_t(scale(rng))) * r.scale2;
      sum += w;
      sq += w * w;
    }
    const double mean = sum / n, std = std::sqrt(sq / n - mean * mean);
    EXPECT_NEAR(std, target, 0.01 * target);
    EXPECT_LT(std::fabs(mean), 0.02 * target);
  }
}
