// Host checks of the integer part of the device E2M1 decode (nvfp4_bits.h), which the GEMV and
// MoE decode kernels use: every nibble's fp16 pattern is E2M1·2^-14 exactly, and the word form
// (two weights per shift pair) gives each weight's pattern for every nibble value in every
// position, whatever its neighbours hold.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "backends/cuda/nvfp4/nvfp4_bits.h"
#include "model/nvfp4.h"

namespace striker::cuda::testing {
namespace {

// IEEE binary16 bit pattern -> value (subnormals included).
double half_value(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  const double mag = exp == 0 ? std::ldexp(double(mant), -24) : std::ldexp(1.0 + mant / 1024.0, exp - 15);
  return sign ? -mag : mag;
}

TEST(Nvfp4Bits, EveryNibbleIsE2m1Times2pm14) {
  for (uint32_t n = 0; n < 16; ++n) {
    const uint16_t h = e2m1_nibble_bits(n);
    const double want = std::ldexp(double(nvfp4::e2m1_value(uint8_t(n))), -14);
    EXPECT_EQ(half_value(h), want) << "nibble " << n;
    EXPECT_EQ(h >> 15, n >> 3) << "sign of nibble " << n;  // -0 keeps its sign, as e2m1_value
    EXPECT_NE((h >> 10) & 0x1F, 0x1Fu) << "nibble " << n << " must not decode to inf/NaN";
  }
}

void expect_word(uint32_t w) {
  const uint32_t pairs[4] = {e2m1_word_pair_bits<0>(w), e2m1_word_pair_bits<1>(w), e2m1_word_pair_bits<2>(w),
                             e2m1_word_pair_bits<3>(w)};
  for (int k = 0; k < 4; ++k) {
    const uint16_t lo = uint16_t(pairs[k] & 0xFFFFu), hi = uint16_t(pairs[k] >> 16);
    ASSERT_EQ(lo, e2m1_nibble_bits((w >> (4 * k)) & 0xFu)) << std::hex << "word 0x" << w << " weight " << k;
    ASSERT_EQ(hi, e2m1_nibble_bits((w >> (4 * (k + 4))) & 0xFu)) << std::hex << "word 0x" << w << " weight "
                                                                   << k + 4;
  }
}

TEST(Nvfp4Bits, WordPairsMatchNibbles) {
  // Every 16-bit pattern in the low half against several high halves, then in the high half.
  const uint32_t others[] = {0u, 0xFFFFu, 0x8888u, 0x7777u, 0x5A5Au, 0x1234u};
  for (uint32_t v = 0; v < 0x10000u; ++v)
    for (uint32_t o : others) {
      expect_word(v | (o << 16));
      expect_word(o | (v << 16));
      if (::testing::Test::HasFatalFailure()) return;
    }
  uint64_t s = 0x243F6A8885A308D3ull;  // and random whole words
  for (int i = 0; i < 200000; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    expect_word(uint32_t(s >> 32));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace striker::cuda::testing
