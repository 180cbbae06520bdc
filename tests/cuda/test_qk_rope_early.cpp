// qk_norm_rope_kv_write with its gammas and RoPE cos/sin computed before the PDL wait
// (DecodeTweaks::rope_before_wait) must write exactly what the variant that computes them after the
// wait writes: q, the k cache and the v cache, bit for bit (NaN-poisoned outputs, untouched slots
// stay NaN in both). The comparison against the CPU reference is CudaQkRopeKv in test_attention.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/qk_rope_kv.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {
namespace {

bool same_bits(const std::vector<bf16>& a, const std::vector<bf16>& b, std::string* where) {
  if (a.size() != b.size()) return *where = "sizes differ", false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(bf16)) != 0) return *where = "first difference at " + std::to_string(i), false;
  return true;
}

TEST(CudaQkRopeKv, EarlyCosSinIsBitIdenticalToLate) {
  std::mt19937 rng(97);
  struct Geometry {
    int nh, nkv, d;
  };
  for (Geometry g : {Geometry{32, 4, 128}, Geometry{8, 1, 32}, Geometry{12, 2, 64}}) {
    for (int T : {1, 3, 8, 37}) {
      for (bool rope : {true, false}) {
        SCOPED_TRACE("d=" + std::to_string(g.d) + " T=" + std::to_string(T) + (rope ? " rope" : " nope"));
        const HeadShape hs{g.nh, g.nkv, g.d};
        const int B = 16, num_blocks = 64;
        std::vector<int32_t> positions;
        std::vector<int64_t> slots;
        std::uniform_int_distribution<int32_t> pos(0, 262143);
        for (int t = 0; t < T; ++t) {
          positions.push_back(t == 0 ? 262143 : pos(rng));
          slots.push_back(int64_t(t * 29 + 3) % (num_blocks * B));
        }
        const auto qkv = random_bf16(rng, size_t(T) * (g.nh + 2 * g.nkv) * g.d, 2.f);
        const auto qw = random_f32(rng, size_t(g.d), 1.f, 0.2f), kw = random_f32(rng, size_t(g.d), 1.f, 0.2f);
        const auto inv = rope_inv_freq(10000.f, g.d);
        DeviceBuffer<bf16> d_qkv(qkv);
        DeviceBuffer<float> d_qw(qw), d_kw(kw), d_inv(inv);
        DeviceBuffer<int32_t> d_pos(positions);
        DeviceBuffer<int64_t> d_slots(slots);
        const size_t cache_elems = size_t(num_blocks) * g.nkv * B * g.d;
        std::vector<bf16> out[2][3];
        for (int early = 0; early < 2; ++early) {
          DeviceBuffer<bf16> d_k(cache_elems), d_v(cache_elems), d_q(size_t(T) * g.nh * g.d);
          d_k.poison();
          d_v.poison();
          d_q.poison();
          qk_norm_rope_kv_write(d_qkv.get(), T, hs, d_qw.get(), d_kw.get(), 1e-6f, d_pos.get(),
                                rope ? d_inv.get() : nullptr, d_slots.get(), B, d_k.get(), d_v.get(), d_q.get(),
                                nullptr, early == 1);
          out[early][0] = d_q.download();
          out[early][1] = d_k.download();
          out[early][2] = d_v.download();
        }
        const char* names[3] = {"q", "k cache", "v cache"};
        for (int i = 0; i < 3; ++i) {
          std::string where;
          EXPECT_TRUE(same_bits(out[0][i], out[1][i], &where)) << names[i] << ": " << where;
        }
        // Not vacuous: q was written (no NaN left in it).
        bool q_written = true;
        for (const bf16& v : out[1][0]) q_written = q_written && !std::isnan(bf16_to_float(v));
        EXPECT_TRUE(q_written) << "q still holds poison";
      }
    }
  }
}

}  // namespace
}  // namespace striker::cuda::testing
