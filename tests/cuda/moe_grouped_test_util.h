// Shared by the grouped-MoE GPU tests (test_moe_grouped*.cpp): device buffers of one routing,
// and random NVFP4 expert stacks with their per-expert scale2 and host-side dequantisations.
#pragma once
#include <cmath>
#include <random>
#include <vector>

#include "backends/cuda/moe/moe_grouped.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "backends/cuda/nvfp4/nvfp4_moe.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {

// Device buffers of one routing, sized for T tokens (outputs NaN/-1 poisoned).
struct DeviceRouting {
  DeviceBuffer<int32_t> ids, sorted, row, num;
  DeviceBuffer<MoeTile> tiles;
  MoeRouting r;
  DeviceRouting(const std::vector<int32_t>& topk_ids, int T, int K, int E, int tile_rows)
      : ids(topk_ids), sorted(size_t(T) * K), row(size_t(T) * K), num(1),
        tiles(size_t(moe_max_tiles(int64_t(T) * K, E, tile_rows))) {
    sorted.poison();
    row.poison();
    num.poison();
    tiles.poison();
    r = MoeRouting{sorted.get(), row.get(), tiles.get(), num.get(), E, tile_rows};
  }
};

// Codes uniform over all bytes; scale bytes uniform in [lo, hi].
inline Nvfp4HostMatrix random_nvfp4(std::mt19937& rng, int64_t rows, int in, int lo = 0x30, int hi = 0x40) {
  Nvfp4HostMatrix m;
  m.codes.resize(size_t(rows) * size_t(in / 2));
  m.scales.resize(size_t(rows) * size_t(in / 16));
  for (auto& c : m.codes) c = uint8_t(rng() & 0xFF);
  std::uniform_int_distribution<int> sd(lo, hi);
  for (auto& s : m.scales) s = uint8_t(sd(rng));
  return m;
}

// One NVFP4 expert stack on the device, with its per-expert scale2.
struct DeviceStack {
  DeviceBuffer<uint8_t> codes, scales;
  DeviceBuffer<float> s2;
  DeviceStack(const Nvfp4HostMatrix& m, const std::vector<float>& scale2)
      : codes(m.codes), scales(m.scales), s2(scale2) {}
  Nvfp4Stack view() const { return {{codes.get(), scales.get()}, s2.get()}; }
};

// Per-expert scale2: even experts a power of two, odd ones not (both around 2^-7).
inline std::vector<float> mixed_scale2(int E, float base) {
  std::vector<float> s(static_cast<size_t>(E));
  for (int e = 0; e < E; ++e)
    s[size_t(e)] = e % 2 == 0 ? std::ldexp(1.f, -6 - e % 5) : base * (1.f + 0.37f * float(e % 7));
  return s;
}

// The stack dequantised to bf16 (exact) and scaled by scale2 into floats (moe_float_ref's input).
inline std::vector<bf16> dequantized_bf16(const Nvfp4HostMatrix& m, int64_t rows, int in) {
  const auto f = nvfp4_dequantize_ref(m, rows, in);
  std::vector<bf16> out(f.size());
  for (size_t i = 0; i < f.size(); ++i) out[i] = float_to_bf16(f[i]);
  return out;
}
inline std::vector<float> scaled_floats(const Nvfp4HostMatrix& m, int64_t rows, int in, const std::vector<float>& s2,
                                 int64_t per_expert) {
  auto f = nvfp4_dequantize_ref(m, rows, in);
  for (size_t i = 0; i < f.size(); ++i) f[i] *= s2[i / size_t(per_expert)];
  return f;
}

// Random NVFP4 gate/up/down stacks of E experts (hidden H, inter I) with mixed per-expert scale2:
// on the device, and dequantised and scaled on the host (moe_float_ref's weights).
struct ScaledNvfp4Experts {
  Nvfp4HostMatrix g, u, d;  // drawn from rng in this order
  std::vector<float> s2g, s2u, s2d;
  DeviceStack ng, nu, nd;
  std::vector<float> fg, fu, fd;
  ScaledNvfp4Experts(std::mt19937& rng, int E, int H, int I)
      : g(random_nvfp4(rng, int64_t(E) * I, H)),
        u(random_nvfp4(rng, int64_t(E) * I, H)),
        d(random_nvfp4(rng, int64_t(E) * H, I)),
        s2g(mixed_scale2(E, 0.0061f)),
        s2u(mixed_scale2(E, 0.0093f)),
        s2d(mixed_scale2(E, 0.0042f)),
        ng(g, s2g),
        nu(u, s2u),
        nd(d, s2d),
        fg(scaled_floats(g, int64_t(E) * I, H, s2g, int64_t(I) * H)),
        fu(scaled_floats(u, int64_t(E) * I, H, s2u, int64_t(I) * H)),
        fd(scaled_floats(d, int64_t(E) * H, I, s2d, int64_t(H) * I)) {}
};

}  // namespace striker::cuda::testing
