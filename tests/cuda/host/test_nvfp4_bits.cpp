// Host checks of the integer part of the device E2M1 decode (nvfp4_bits.h), which the GEMV and
// MoE decode kernels use: every nibble's fp16 pattern is E2M1·2^-14 exactly, and the word form
// (two weights per shift pair) gives each weight's pattern for every nibble value in every
// position, whatever its neighbours hold.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "backends/cuda/nvfp4/nvfp4_bf16_bits.h"
#include "backends/cuda/nvfp4/nvfp4_bits.h"
#include "core/bf16.h"
#include "model/nvfp4.h"

namespace striker::cuda::testing {
namespace {

// An IEEE-style bit pattern with E exponent and M mantissa bits -> value (subnormals included).
template <int E, int M>
double binary_value(uint32_t bits) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  const uint32_t sign = (bits >> (E + M)) & 1u, exp = (bits >> M) & ((1u << E) - 1), mant = bits & ((1u << M) - 1);
  const double mag = exp == 0 ? std::ldexp(double(mant), 1 - kBias - M)
                              : std::ldexp(1.0 + std::ldexp(double(mant), -M), int(exp) - kBias);
  return sign ? -mag : mag;
}
double half_value(uint16_t h) { return binary_value<5, 10>(h); }
double bf16_value(uint16_t b) { return binary_value<8, 7>(b); }

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

TEST(Nvfp4Bits, EveryNibbleIsE2m1Times2pm126InBf16) {
  for (uint32_t n = 0; n < 16; ++n) {
    const uint16_t b = e2m1_nibble_bf16_bits(n);
    EXPECT_EQ(bf16_value(b), std::ldexp(double(nvfp4::e2m1_value(uint8_t(n))), -126)) << "nibble " << n;
    EXPECT_EQ(b >> 15, n >> 3) << "sign of nibble " << n;
  }
}

TEST(Nvfp4Bits, Bf16WordPairsMatchNibbles) {
  uint64_t s = 0x13198A2E03707344ull;
  for (int i = 0; i < 400000; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t w = i < 0x10000 ? uint32_t(i) * 0x10001u ^ uint32_t(s >> 40) : uint32_t(s >> 32);
    constexpr E2m1Pairs S = E2m1Pairs::kShifts, M = E2m1Pairs::kMultiply;
    const uint32_t shifts[4] = {e2m1_word_pair_bf16_bits<0, S>(w), e2m1_word_pair_bf16_bits<1, S>(w),
                                e2m1_word_pair_bf16_bits<2, S>(w), e2m1_word_pair_bf16_bits<3, S>(w)};
    const uint32_t mul[4] = {e2m1_word_pair_bf16_bits<0, M>(w), e2m1_word_pair_bf16_bits<1, M>(w),
                             e2m1_word_pair_bf16_bits<2, M>(w), e2m1_word_pair_bf16_bits<3, M>(w)};
    for (int k = 0; k < 4; ++k)
      for (const uint32_t p : {shifts[k], mul[k]}) {
        ASSERT_EQ(p & 0xFFFFu, e2m1_nibble_bf16_bits((w >> (4 * k)) & 0xFu)) << std::hex << w << " " << k;
        ASSERT_EQ(p >> 16, e2m1_nibble_bf16_bits((w >> (4 * (k + 4))) & 0xFu)) << std::hex << w << " " << k;
      }
  }
}

// The folded weight of every nibble under every scale byte is the codec's E2M1·E4M3 times 2^-8,
// exactly and as a normal bf16 (the host form of bf16x2_mul rounds as the device's mul.rn.bf16x2;
// the device itself is checked by CudaNvfp4.PairDecodeMatchesHostOnEveryByteAndScale).
TEST(Nvfp4Bits, FoldedPairIsCodecWeightTimes2pm8) {
  for (uint32_t b = 0; b < 256; ++b) {
    const uint32_t sc = ue4m3_bf16x2_x2p118_bits(b);
    ASSERT_EQ(sc >> 16, sc & 0xFFFFu) << "scale byte " << b;
    for (uint32_t n = 0; n < 16; ++n) {
      const uint32_t w = n | (((n + 5) & 0xFu) << 16);  // weights 0 and 4 of the word
      const uint32_t p = nvfp4_pair_bf16<0>(w, sc);
      const double want0 = double(nvfp4::e2m1_value(uint8_t(n))) * nvfp4::ue4m3_value(uint8_t(b));
      const double want1 = double(nvfp4::e2m1_value(uint8_t((n + 5) & 0xFu))) * nvfp4::ue4m3_value(uint8_t(b));
      ASSERT_EQ(bf16_value(uint16_t(p)) * kNvfp4PairUnscale, want0) << "nibble " << n << " scale byte " << b;
      ASSERT_EQ(bf16_value(uint16_t(p >> 16)) * kNvfp4PairUnscale, want1) << "nibble " << n << " scale byte " << b;
      if (want0 != 0.0) ASSERT_NE((p >> 7) & 0xFFu, 0u) << "subnormal product, nibble " << n << " scale " << b;
    }
  }
}

// Canonical scale bytes (nvfp4_scales.h): only 0x7F changes, to 0x00, which decodes to the same 0.
TEST(Nvfp4Bits, CanonicalScaleKeepsEveryValue) {
  for (uint32_t b = 0; b < 256; ++b) {
    const uint32_t c = nvfp4_canonical_scale(b);
    EXPECT_EQ(c, b == 0x7Fu ? 0u : b) << "scale byte " << b;
    EXPECT_EQ(nvfp4::ue4m3_value(uint8_t(c)), nvfp4::ue4m3_value(uint8_t(b))) << "scale byte " << b;
    EXPECT_EQ(ue4m3_bf16x2_x2p118_bits(c), ue4m3_bf16x2_x2p118_bits(b)) << "scale byte " << b;
  }
}

// The two-byte scale decode of the tensor-core kernels gives, for every pair of canonical bytes and
// whatever the word's upper half holds, what the one-byte form gives each byte (which
// FoldedPairIsCodecWeightTimes2pm8 ties to the codec). A 0x7F byte is the one it reads otherwise.
TEST(Nvfp4Bits, TwoScaleBytesDecodeAsOneEach) {
  size_t checked = 0;
  for (uint32_t s = 0; s < 0x10000u; ++s) {
    const uint32_t b0 = s & 0xFFu, b1 = s >> 8;
    for (const uint32_t junk : {0x0u, 0xFFFF0000u, 0x7F7F0000u, 0x12340000u}) {
      uint32_t lo = 0, hi = 0;
      ue4m3x2_bf16x2_x2p118_bits(s | junk, lo, hi);
      if (b0 != 0x7Fu) ASSERT_EQ(lo, ue4m3_bf16x2_x2p118_bits(b0)) << std::hex << "word 0x" << (s | junk);
      if (b1 != 0x7Fu) ASSERT_EQ(hi, ue4m3_bf16x2_x2p118_bits(b1)) << std::hex << "word 0x" << (s | junk);
      if (b0 == 0x7Fu) ASSERT_NE(lo, 0u) << "a non-canonical 0x7F is not read as 0";
      checked += 2;
    }
  }
  EXPECT_EQ(checked, size_t(0x10000) * 8);
}

}  // namespace
}  // namespace striker::cuda::testing
