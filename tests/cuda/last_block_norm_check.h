// The check shared by the decode kernels whose last CTA writes the next layer's input norm
// (elementwise/rmsnorm_row.cuh, last_block_norm): run with the norm, h must be the same bits as the
// kernel run without it, and x the same bits as the rmsnorm kernel on that h; the counter must be
// back at zero, so a second launch (a graph replay) gets the same result.
#pragma once
#include <gtest/gtest.h>

#include <random>

#include "backends/cuda/elementwise/rmsnorm.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {

// `run(h, next)` launches the kernel under test on h [T, H] (next: null for the plain kernel).
template <class Run>
void expect_last_block_norm_bits(std::mt19937& rng, const std::vector<bf16>& h, int T, int H, Run run) {
  const float eps = 1e-6f;
  const auto gamma = random_f32(rng, size_t(H), 1.f, 0.3f);
  DeviceBuffer<float> d_gamma(gamma);
  DeviceBuffer<bf16> d_h_plain(h), d_x_plain(h.size()), d_h(h.size()), d_x(h.size());
  run(d_h_plain.get(), nullptr);
  rmsnorm(d_h_plain.get(), d_gamma.get(), d_x_plain.get(), T, H, eps, nullptr);
  const auto h_plain = d_h_plain.download(), x_plain = d_x_plain.download();
  auto counter = zero_counters(1);
  for (int launch = 0; launch < 2; ++launch) {
    SCOPED_TRACE("launch " + std::to_string(launch));
    d_h.upload(h);
    d_x.poison();
    const RowNorm next{d_gamma.get(), eps, d_x.get(), counter.get()};
    run(d_h.get(), &next);
    const auto hf = d_h.download(), xf = d_x.download();
    size_t h_differ = 0, x_differ = 0;
    for (size_t i = 0; i < hf.size(); ++i) {
      h_differ += hf[i].bits != h_plain[i].bits;
      x_differ += xf[i].bits != x_plain[i].bits;
    }
    EXPECT_EQ(h_differ, 0u) << "h with the fused norm vs without";
    EXPECT_EQ(x_differ, 0u) << "x from the last CTA vs the rmsnorm kernel";
    EXPECT_TRUE(counters_are_zero(counter));
  }
}

}  // namespace striker::cuda::testing
