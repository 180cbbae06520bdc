// Integer half of the device-side E2M1 decode, host-callable so a host test can check it on
// every nibble pattern (tests/cuda/host/test_nvfp4_bits.cpp).
//
// An E2M1 nibble s|e1 e0|m becomes an fp16 bit pattern with the sign at bit 15, e1 e0 in the
// exponent's low bits 10–11 and m in the top mantissa bit 9. fp16's bias of 15 then gives
// 2^(e-15)·(1+m/2) = E2M1·2^-14 for e > 0 and the subnormal m·2^-15 = E2M1·2^-14 for e = 0,
// so the value is exact and needs no special case.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define STRIKER_NVFP4_BITS_FN __host__ __device__ __forceinline__
#else
#define STRIKER_NVFP4_BITS_FN inline
#endif

namespace striker::cuda {

// A code word holds 8 weights, weight j in nibble j (bits 4j..4j+3: byte b's low nibble is
// weight 2b, its high nibble weight 2b+1). Pair K (0..3) returns a half2 bit pattern with weight
// K in the low half and weight K+4 in the high half. Pairing nibbles 16 bits apart lets one
// shift move both into place at once: 2 shifts + 2 logic ops per two weights, no byte extraction.
template <int K>
STRIKER_NVFP4_BITS_FN uint32_t e2m1_word_pair_bits(uint32_t w) {
  static_assert(K >= 0 && K < 4, "a code word has 4 nibble pairs");
  const uint32_t sign = (w << (12 - 4 * K)) & 0x80008000u;  // nibble bit 4K+3 -> bit 15 (and +16 -> 31)
  // nibble bits 4K..4K+2 -> bits 9..11 (and 25..27): a left shift by 9-4K, i.e. right by 3 for K = 3.
  const uint32_t mag = (K < 3 ? (w << ((9 - 4 * K) & 31)) : (w >> 3)) & 0x0E000E00u;
  return sign | mag;
}

// The same pairing as bf16 bit patterns of E2M1·2^-126, for the tensor-core decode (nvfp4_bf16_bits.h
// nvfp4_pair_bf16): e1 e0 go to bf16's exponent bits 7–8, m to mantissa bit 6, the sign to bit 15.
// bf16's bias of 127 gives 2^(e-127)·(1+m/2) = E2M1·2^-126 for e > 0 and the subnormal m·2^-127 =
// E2M1·2^-126 for e = 0: exact, no table, no special case. Two forms with the same bits:
//  - kShifts: two shifts and two logic ops per pair, all on the integer pipe;
//  - kMultiply: the pair's two nibbles isolated, then one multiply by 2^6 + 2^12 (2^2 + 2^8 for the odd
//    pairs) makes the magnitude's and the sign's shifted copies at once — they land on bits 6–9 and
//    12–15 of each half, which never overlap, so the sum carries nothing — and one mask keeps bits 6–8
//    and 15: AND, IMAD, AND per pair plus one shift per word for pairs 2 and 3 (13 instructions per
//    word instead of 16).
// Measured (H100, thirty-seventh session, docs/performance.md): kMultiply wins where the decode's issue
// bounds the kernel (the per-slot MoE kernels and the skinny GEMMs of 2+ tokens: 8 x 8K -0.1 ms) and
// loses in the one-token GEMVs (+0.5 us per call), whose decode is on the latency path; each kernel
// family takes the form that won for it.
enum class E2m1Pairs { kShifts, kMultiply };

template <int K, E2m1Pairs D = E2m1Pairs::kMultiply>
STRIKER_NVFP4_BITS_FN uint32_t e2m1_word_pair_bf16_bits(uint32_t w) {
  static_assert(K >= 0 && K < 4, "a code word has 4 nibble pairs");
  if constexpr (D == E2m1Pairs::kShifts) {
    const uint32_t sign = (w << (12 - 4 * K)) & 0x80008000u;  // nibble bit 4K+3 -> bit 15 (and 31)
    // nibble bits 4K..4K+2 -> bits 6..8 (and 22..24): left by 6 or 2, right by 2 or 6.
    const uint32_t mag = (K == 0 ? w << 6 : K == 1 ? w << 2 : K == 2 ? w >> 2 : w >> 6) & 0x01C001C0u;
    return sign | mag;
  } else {
    const uint32_t v = K < 2 ? w : w >> 8;                         // nibbles K, K+4 at bits 4(K&1) and +16
    const uint32_t x = v & (0x000F000Fu << (4 * (K & 1)));         // only those two nibbles
    const uint32_t y = x * ((K & 1) ? 0x00000104u : 0x00001040u);  // copies at bits 6-9 and 12-15 (+16)
    return y & 0x81C081C0u;                                        // magnitude 6-8, sign 15 (+16)
  }
}

// The same bf16 pattern for one nibble.
STRIKER_NVFP4_BITS_FN uint16_t e2m1_nibble_bf16_bits(uint32_t nibble) {
  return uint16_t(((nibble & 0x8u) << 12) | ((nibble & 0x7u) << 6));
}

// The same fp16 pattern for one nibble (the definition the word form is tested against).
STRIKER_NVFP4_BITS_FN uint16_t e2m1_nibble_bits(uint32_t nibble) {
  return uint16_t(((nibble & 0x8u) << 12) | ((nibble & 0x7u) << 9));
}

}  // namespace striker::cuda
