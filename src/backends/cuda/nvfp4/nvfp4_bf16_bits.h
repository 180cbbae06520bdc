// NVFP4 -> bf16 decode of a wgmma A fragment in registers (moe_grouped_wgmma_nvfp4.cu), written
// once for host and device so tests/cuda/host/test_moe_grouped_wgmma_nvfp4_layout.cpp checks the
// very code the kernel runs on every code byte and scale byte.
//
// A bf16 weight is E2M1(code)·E4M3(scale) (exact: at most 5 significant bits, magnitudes from
// 2^-10 to 2688, so never a bf16 subnormal), made in two steps:
//   1. E2M1 -> bf16 bits by table: the 8 magnitudes' high and low bytes are two 8-byte tables, and
//      one prmt (byte_perm) looks up four nibbles at once; two more prmts interleave the bytes into
//      bf16x2 words, and the sign bits are moved to bits 15/31 with one multiply (shifted copies
//      that never carry into bits 15 or 31) and xored in.
//   2. one bf16x2 multiply by the row's scale (as bf16, decoded by ue4m3_bf16_bits): exact.
#pragma once
#include <cstdint>
#include <cstring>

#include "backends/cuda/nvfp4/nvfp4_bits.h"

#ifdef __CUDACC__
#define STRIKER_NVFP4_BF16_FN __host__ __device__ __forceinline__
#else
#define STRIKER_NVFP4_BF16_FN inline
#endif

namespace striker::cuda {

// prmt.b32 (default mode) with selector nibbles < 8: byte n of the result is byte s[4n+2:4n] of
// the eight bytes {y:x} (x = bytes 0-3).
STRIKER_NVFP4_BF16_FN uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#ifdef __CUDA_ARCH__
  return __byte_perm(x, y, s);
#else
  const uint64_t v = (uint64_t(y) << 32) | x;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n) r |= uint32_t((v >> (8 * ((s >> (4 * n)) & 7u))) & 0xFFu) << (8 * n);
  return r;
#endif
}

// bf16 bits of the E2M1 magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6 (code & 7), split into bytes.
constexpr uint32_t kE2m1HiBytes0 = 0x3F3F3F00u, kE2m1HiBytes1 = 0x40404040u;  // 00 3F 3F 3F | 40 40 40 40
constexpr uint32_t kE2m1LoBytes0 = 0xC0800000u, kE2m1LoBytes1 = 0xC0804000u;  // 00 00 80 C0 | 00 40 80 C0

// Four E2M1 codes (nibbles 0-3 of p, nibble j = weight j; bits 16-31 ignored) -> lo = bf16x2 of
// weights (0, 1), hi = bf16x2 of weights (2, 3), low half first.
STRIKER_NVFP4_BF16_FN void e2m1x4_to_bf16x2(uint32_t p, uint32_t& lo, uint32_t& hi) {
  const uint32_t sel = p & 0x7777u;
  const uint32_t hb = byte_perm(kE2m1HiBytes0, kE2m1HiBytes1, sel);
  const uint32_t lb = byte_perm(kE2m1LoBytes0, kE2m1LoBytes1, sel);
  const uint32_t sg = p & 0x8888u;  // sign bits 3, 7, 11, 15
  // weights 0, 1: bit 3 -> 15 (<< 12), bit 7 -> 31 (<< 24); the other shifted copies land on
  // bits 7-27 and 35+, and the one collision (bit 27) carries only into bit 28.
  lo = byte_perm(lb, hb, 0x5140u) ^ ((sg * 0x01001000u) & 0x80008000u);
  // weights 2, 3: bit 11 -> 15 (<< 4), bit 15 -> 31 (<< 16); collision at bit 19 carries into 20.
  hi = byte_perm(lb, hb, 0x7362u) ^ ((sg * 0x00010010u) & 0x80008000u);
}

// UE4M3 scale byte -> bf16 bits, the value model/nvfp4.cpp gives (nvfp4_decode.cuh ue4m3_x2p14):
// 0x7F -> 0, otherwise bit 7 ignored (0xFF -> 480), subnormals m·2^-9 (normal in bf16).
STRIKER_NVFP4_BF16_FN uint32_t ue4m3_bf16_bits(uint32_t b) {
  if (b == 0x7Fu) return 0;
  b &= 0x7Fu;
  const uint32_t e = b >> 3, m = b & 7u;
  if (e != 0) return ((e + 120u) << 7) | (m << 4);  // 2^(e-7)·(1+m/8): bf16 exponent e - 7 + 127
  if (m == 0) return 0;
  const uint32_t p = m >= 4 ? 2u : m >= 2 ? 1u : 0u;  // m·2^-9 = 2^(p-9)·(m/2^p)
  return ((p + 118u) << 7) | ((m - (1u << p)) << (7 - p));
}

// The same value as ue4m3_bf16_bits, branch-free, in both halves of a word (what bf16x2_mul
// takes): the 7 magnitude bits as an fp32 exponent/mantissa with no bias give E4M3·2^-120 (fp32
// subnormal for e = 0, exactly m·2^-129); one multiply by 2^120 (not flushed: mul.rn.f32 without
// .ftz) makes it normal, and its top 16 bits are the bf16 (at most 4 significant bits: exact).
STRIKER_NVFP4_BF16_FN uint32_t ue4m3_bf16x2_bits(uint32_t b) {
  const uint32_t u = (b & 0x7Fu) << 20;
  float f;
#ifdef __CUDA_ARCH__
  asm("mul.rn.f32 %0, %1, 0f7B800000;" : "=f"(f) : "f"(__uint_as_float(u)));  // 2^120
  const uint32_t bits = __float_as_uint(f);
#else
  std::memcpy(&f, &u, 4);
  f *= 0x1p120f;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
#endif
  return b == 0x7Fu ? 0u : byte_perm(bits, 0, 0x3232u);
}

// The tensor-core decode's scale: E4M3(b)·2^118 as bf16 in both halves (exact: at most 4 significant
// bits, 2^109 to 448·2^118 < 2^127), 0x7F -> 0 and bit 7 ignored as ue4m3_bf16_bits. Times the
// E2M1·2^-126 pattern of e2m1_word_pair_bf16_bits it gives the weight E2M1·E4M3 times 2^-8, a normal
// bf16 (2^-18 to 10.5) — see nvfp4_pair_bf16. The 7 magnitude bits as an fp32 exponent/mantissa with
// no bias are E4M3·2^-120 (subnormal for e = 0, exactly m·2^-129); two multiplies by 2^127 and 2^111
// (no .ftz) make it E4M3·2^118 exactly.
STRIKER_NVFP4_BF16_FN uint32_t ue4m3_bf16x2_x2p118_bits(uint32_t b) {
  const uint32_t u = (b & 0x7Fu) << 20;
  float f;
#ifdef __CUDA_ARCH__
  asm("mul.rn.f32 %0, %1, 0f7F000000;" : "=f"(f) : "f"(__uint_as_float(u)));  // 2^127
  asm("mul.rn.f32 %0, %0, 0f77000000;" : "+f"(f));                            // 2^111
  const uint32_t bits = __float_as_uint(f);
#else
  std::memcpy(&f, &u, 4);
  f *= 0x1p127f;
  f *= 0x1p111f;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
#endif
  return (b & 0xFFu) == 0x7Fu ? 0u : byte_perm(bits, 0, 0x3232u);  // 0xFF is 480, as the codec
}

// a·b per bf16 half, rounded to nearest-even (exact for the products above).
STRIKER_NVFP4_BF16_FN uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
#ifdef __CUDA_ARCH__
  uint32_t d;
  asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  uint32_t r = 0;
  for (int h = 0; h < 2; ++h) {
    const uint32_t ua = ((a >> (16 * h)) & 0xFFFFu) << 16, ub = ((b >> (16 * h)) & 0xFFFFu) << 16;
    float fa, fb;
    std::memcpy(&fa, &ua, 4);
    std::memcpy(&fb, &ub, 4);
    const float f = fa * fb;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;  // nearest-even (no NaN/inf arise here)
    r |= u << (16 * h);
  }
  return r;
#endif
}

// The device's scale bytes are canonical (nvfp4_scales.h): the uploads store the E4M3 NaN byte 0x7F,
// which the codec decodes as 0, as 0x00 (the same value), so the tensor-core kernels' decode below
// need not test for it. Every other byte is kept (0xFF stays 480: bit 7 is ignored by every decode).
STRIKER_NVFP4_BF16_FN uint32_t nvfp4_canonical_scale(uint32_t b) { return (b & 0xFFu) == 0x7Fu ? 0u : b & 0xFFu; }

// Two canonical scale bytes (bits 0-7 and 8-15 of s; bits 16-31 ignored) -> lo, hi: each as
// ue4m3_bf16x2_x2p118_bits gives it (E4M3·2^118 as bf16 in both halves), in 7 instructions for the
// pair instead of ~8 per byte. (s & 0x7F7F)·(2^4 + 2^12) puts b0 << 4 on bits 4-10 and b1 << 20 on bits
// 20-26 (the other two copies, b0 << 12 and b1 << 12, share bits 12-19 and carry no further), so the
// mask leaves each magnitude 4 bits up in its own half: the bf16 E4M3·2^-120 (subnormal for e = 0,
// m·2^-129), which two exact bf16x2 multiplies by 2^119 (subnormals kept by mul.rn.bf16x2) make
// E4M3·2^118. A non-canonical 0x7F byte would give 480·2^118, not 0.
STRIKER_NVFP4_BF16_FN void ue4m3x2_bf16x2_x2p118_bits(uint32_t s, uint32_t& lo, uint32_t& hi) {
  constexpr uint32_t k2p119 = 0x7B007B00u;  // bf16 2^119 in both halves
  const uint32_t m = ((s & 0x7F7Fu) * 0x1010u) & 0x07F007F0u;
  const uint32_t v = bf16x2_mul(bf16x2_mul(m, k2p119), k2p119);
  lo = byte_perm(v, 0, 0x1010u);
  hi = byte_perm(v, 0, 0x3232u);
}

// A fragment of wgmma .m64nNk16 (bf16, A in registers) of one 16-weight group (one k16 step):
// a thread of quad lane c = lane % 4 holds rows g and g + 8 of its warp's 16 (g = lane / 4) at
// k = 2c, 2c+1 (a[0] row g, a[1] row g+8) and k = 2c+8, 2c+9 (a[2] row g, a[3] row g+8) — the
// mma.m16n8k16 A layout. Weights 2c, 2c+1 of a group are byte c of its first code word, weights
// 2c+8, 2c+9 byte c of its second. g0/g1: the two code words of row g, h0/h1 of row g+8;
// scale_g, scale_h: the rows' scales as bf16 bits in both halves.
STRIKER_NVFP4_BF16_FN void nvfp4_a_fragment(uint32_t g0, uint32_t g1, uint32_t h0, uint32_t h1, uint32_t scale_g,
                                            uint32_t scale_h, int c, uint32_t (&a)[4]) {
  const uint32_t sel = uint32_t(c) | (uint32_t(c + 4) << 4);  // bytes c of w0 and of w1
  uint32_t lo, hi;
  e2m1x4_to_bf16x2(byte_perm(g0, g1, sel), lo, hi);
  a[0] = bf16x2_mul(lo, scale_g);
  a[2] = bf16x2_mul(hi, scale_g);
  e2m1x4_to_bf16x2(byte_perm(h0, h1, sel), lo, hi);
  a[1] = bf16x2_mul(lo, scale_h);
  a[3] = bf16x2_mul(hi, scale_h);
}

// Weights K and K + 4 of code word w (nvfp4_bits.h pairing) as a bf16x2 of E2M1·E4M3·2^-8 (weight K
// in the low half), given the group's scale as ue4m3_bf16x2_x2p118_bits: exact, so a tensor-core sum
// over such weights is 2^-8 times the sum over E2M1·E4M3 (no product is near the subnormal range:
// kNvfp4PairUnscale undoes it with the fp32 result). About 2 instructions per weight (the pair's bits,
// e2m1_word_pair_bf16_bits in form D, and one bf16x2 multiply per pair); bf16's subnormals are kept by
// mul.rn.bf16x2.
constexpr float kNvfp4PairUnscale = 256.f;  // 2^8

template <int K, E2m1Pairs D = E2m1Pairs::kMultiply>
STRIKER_NVFP4_BF16_FN uint32_t nvfp4_pair_bf16(uint32_t w, uint32_t scale_x2p118) {
  return bf16x2_mul(e2m1_word_pair_bf16_bits<K, D>(w), scale_x2p118);
}

}  // namespace striker::cuda
