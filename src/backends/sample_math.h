// The arithmetic of token sampling that the CPU sampler (src/engine/sampler.cpp) and the GPU
// kernels (src/backends/cuda/sampling/sampling.cu) must compute bit for bit alike: the per-token random
// numbers of the exponential race, the race score, the min_p floor and the penalties.
//
// Why bit-exact: the race picks argmax over kept tokens of a float score; if the two sides
// rounded one score differently, a near-tie could pick different tokens. So every operation
// here is a single IEEE-rounded +, -, *, / (on the device through the __f*_rn intrinsics, which
// nvcc never fuses into FMA; on the host x86-64 baseline has no FMA for gcc to contract into),
// and the logarithm is our own polynomial instead of the libm/CUDA logf, which differ in ulps.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__CUDACC__)
#define STRIKER_HD __host__ __device__ __forceinline__
#else
#define STRIKER_HD inline
#endif

namespace striker::sample_math {

STRIKER_HD float fmul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
STRIKER_HD float fadd(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
STRIKER_HD float fsub(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
STRIKER_HD float fdiv(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

STRIKER_HD uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
STRIKER_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// A key whose unsigned order is the float order (-inf lowest, +inf highest; NaN must be
// filtered out by the caller, it would sort above +inf). Radix select works on these keys.
// -0 maps to +0's key: the float comparisons of the CPU sampler see them as a tie.
STRIKER_HD uint32_t order_key(float f) {
  uint32_t b = float_bits(f);
  if (b == 0x80000000u) b = 0;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
STRIKER_HD float key_float(uint32_t k) { return bits_float((k & 0x80000000u) ? (k & 0x7FFFFFFFu) : ~k); }

STRIKER_HD uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// Mixes two words into a well-spread 64-bit value.
STRIKER_HD uint64_t mix(uint64_t a, uint64_t b) { return splitmix(splitmix(a) ^ (b + 0x632BE59BD9B4E019ull)); }
// The race's per-draw key: the random numbers of one draw depend only on (seed, choice, step).
STRIKER_HD uint64_t race_key(uint64_t seed, uint64_t choice, uint64_t step) { return mix(mix(seed, choice), step); }

// Uniform in (0, 1) for token `id` of the draw `key`: 23 random bits + 1/2 so both ends are
// excluded and the value is exact in a float (the largest, 1 - 2^-24, is representable).
STRIKER_HD float race_uniform(uint64_t key, int32_t id) {
  const uint64_t r = splitmix(key + uint64_t(uint32_t(id)) * 0xD1B54A32D192ED03ull);
  return (float(uint32_t(r >> 41)) + 0.5f) * (1.0f / 8388608.0f);
}

// Natural log of a positive normal float from basic rounded operations only (about 1e-7
// relative error): x = 2^e * f with f in [sqrt(1/2), sqrt(2)), log f = 2 atanh((f-1)/(f+1)).
STRIKER_HD float det_log(float x) {
  const uint32_t b = float_bits(x);
  int e = int((b >> 23) & 0xFFu) - 127;
  float f = bits_float((b & 0x007FFFFFu) | 0x3F800000u);  // [1, 2)
  if (f > 1.41421356f) {
    f = fmul(f, 0.5f);
    e += 1;
  }
  const float s = fdiv(fsub(f, 1.0f), fadd(f, 1.0f));
  const float s2 = fmul(s, s);
  // 1 + s^2/3 + s^4/5 + s^6/7 + s^8/9 (Horner); the next term is below 2e-10.
  float poly = fadd(1.0f / 7.0f, fmul(s2, 1.0f / 9.0f));
  poly = fadd(1.0f / 5.0f, fmul(s2, poly));
  poly = fadd(1.0f / 3.0f, fmul(s2, poly));
  poly = fadd(1.0f, fmul(s2, poly));
  return fadd(fmul(float(e), 0.693147182f), fmul(fmul(2.0f, s), poly));
}

// Tempered logit relative to the row maximum: log of the unnormalised probability.
STRIKER_HD float tempered(float x, float m, float inv_t) { return fmul(fsub(x, m), inv_t); }

// top_p's probability mass of a token, exp(tempered logit) in (0, 1], in fixed point: units of 2^-44.
// Integer sums are exact and do not depend on their order, so the GPU's atomically summed
// histograms give the same bits every run; 2^19 tokens of mass 1 still fit in 63 bits. The float
// exp (within 2 ulp on either side; 2^-24 of the token's mass) and the rounding to 2^-44 move a cut
// only within the tolerance the sampler tests give to sums in different orders (1e-5 of the mass).
constexpr float kMassUnit = 17592186044416.0f;  // 2^44
STRIKER_HD uint64_t mass_fixed(float x, float m, float inv_t) {
#if defined(__CUDA_ARCH__)
  return __float2ull_rn(expf(tempered(x, m, inv_t)) * kMassUnit);
#else
  return uint64_t(std::llrint(std::exp(tempered(x, m, inv_t)) * kMassUnit));
#endif
}

// Upper bound of -log(E) over every E the race can draw (E >= -log(1 - 2^-24) ~ 6e-8, so
// -log(E) <= 16.64): a token whose tempered logit is more than this below the best score so
// far cannot win, which lets the CPU skip its hash.
constexpr float kMaxRaceNoise = 17.0f;

// The exponential race: token = argmax p_i / E_i with E_i = -log(u_i) ~ Exp(1), taken in logs
// (the Gumbel-max form). P(i wins) = p_i / sum p: exact in distribution, and every score is
// a pure function of (token, its logit, the key), so the winner does not depend on the order
// in which tokens are visited, on the batch, or on how the vocabulary is split over threads.
// Ties in score go to the lower id.
// `a` is the tempered logit, `u` the token's race_uniform.
STRIKER_HD float race_score_from(float a, float u) {
  const float exp1 = -det_log(u);  // > 0: u < 1
  return fsub(a, det_log(exp1));
}
STRIKER_HD float race_score(float x, float m, float inv_t, uint64_t key, int32_t id) {
  return race_score_from(tempered(x, m, inv_t), race_uniform(key, id));
}

// min_p keeps p_i >= min_p * p_max, i.e. x_i >= m + T * ln(min_p) (ln(min_p) computed once
// on the host and handed to both sides, so the floor is identical).
inline float min_p_log(float min_p) { return float(std::log(double(min_p))); }  // host only
STRIKER_HD float min_p_floor(float m, float temperature, float log_min_p) {
  return fadd(m, fmul(temperature, log_min_p));
}

// vLLM's logit processing for one token, in vLLM's order: suppressed -> -inf, + logit_bias,
// repetition penalty (token seen in prompt or output), then frequency/presence over outputs.
STRIKER_HD float process_logit(float v, bool suppressed, float bias, bool repeated, float repetition_penalty,
                               int32_t output_count, float frequency_penalty, float presence_penalty) {
  if (suppressed) v = -std::numeric_limits<float>::infinity();
  v = fadd(v, bias);
  if (repeated && repetition_penalty != 1.0f)
    v = v > 0 ? fdiv(v, repetition_penalty) : fmul(v, repetition_penalty);
  if (output_count > 0 && (frequency_penalty != 0.0f || presence_penalty != 0.0f))
    v = fsub(v, fadd(fmul(frequency_penalty, float(output_count)), presence_penalty));
  return v;
}

}  // namespace striker::sample_math
