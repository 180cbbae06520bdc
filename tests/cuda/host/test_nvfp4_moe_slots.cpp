// slot_token (nvfp4_moe_slots.h): the per-slot MoE kernels' token of a routed slot by an fp32 division,
// checked for every slot one launch can have and K up to 16 — with the quotient moved by up to 2 ulp
// either way, the error the device's __fdividef may add.
#include <cmath>

#include <gtest/gtest.h>

#include "backends/cuda/nvfp4/nvfp4_moe_slots.h"

namespace striker::cuda {
namespace {

TEST(Nvfp4MoeSlots, TokenOfEverySlotWithinTwoUlpOfTheQuotient) {
  int wrong = 0;
  for (int K = 1; K <= 16; ++K)
    for (int slot = 0; slot < 65536; ++slot) {
      const int want = slot / K;
      if (slot_token(slot, K) != want) ++wrong;
      float lo = slot_token_dividend(slot) / float(K), hi = lo;
      for (int u = 0; u < 2; ++u) lo = std::nextafter(lo, 0.f), hi = std::nextafter(hi, 1e30f);
      if (int(lo) != want || int(hi) != want) ++wrong;
    }
  EXPECT_EQ(wrong, 0);
}

}  // namespace
}  // namespace striker::cuda
