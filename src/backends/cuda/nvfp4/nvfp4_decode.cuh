// Device-side NVFP4 decoding and the warp dot product every NVFP4 GEMV-style kernel shares.
#pragma once
#include <cuda_fp16.h>

#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/common/tensor_core.cuh"
#include "backends/cuda/nvfp4/nvfp4_bf16_bits.h"
#include "backends/cuda/nvfp4/nvfp4_bits.h"

namespace striker::cuda {

// UE4M3 scale byte -> value · 2^14 (the 2^14 undoes the 2^-14 of e2m1_pair_x2m14). Decoded as
// model/nvfp4.cpp ue4m3_value does (bit-exact with gguf-py over all 256 bytes): 0x7F (NaN) -> 0,
// otherwise bit 7 ignored — so 0xFF decodes as 480, not 0 — and subnormals m·2^-9.
// Normal: 2^(e-7)·(1+m/8)·2^14 has fp32 exponent field e+134, i.e. bits ((e<<3|m) + 134·8) << 20.
__device__ __forceinline__ float ue4m3_x2p14(uint32_t b) {
  if (b == 0x7Fu) return 0.f;
  b &= 0x7Fu;
  if ((b >> 3) == 0) return float(b) * 32.f;  // m·2^-9·2^14
  return __uint_as_float((b + 1072u) << 20);
}

// One code byte (two E2M1 nibbles) -> (low, high) values · 2^-14, exactly: each nibble s|e1 e0|m
// is placed into an fp16 as sign bit 15, exponent bits 10–11, mantissa bit 9; fp16's bias 15
// then gives 2^(e-15)·(1+m/2) = E2M1·2^-14 for e > 0 and the subnormal m·2^-15 = E2M1·2^-14 for e = 0.
__device__ __forceinline__ float2 e2m1_pair_x2m14(uint32_t byte) {
  const uint32_t t = (byte | (byte << 12)) & 0x000F000Fu;  // low nibble at bits 0-3, high at 16-19
  const uint32_t h = ((t & 0x00080008u) << 12) | ((t & 0x00070007u) << 9);
  __half2_raw raw;
  raw.x = static_cast<unsigned short>(h & 0xFFFFu);
  raw.y = static_cast<unsigned short>(h >> 16);
  return __half22float2(__half2(raw));
}

// half2 bit pattern (see nvfp4_bits.h) -> two floats. Converted straight from the register's two
// halves (HADD2.F32 with .H0_H0 / .H1_H1): going through __half2_raw made ptxas split the word and
// pack it again (SHF + PRMT per pair, ~16 % of the LM head's inner loop). Same values.
__device__ __forceinline__ float2 half2_bits_to_float2(uint32_t h) {
  float2 f;
  asm("{\n\t.reg .f16 lo, hi;\n\tmov.b32 {lo, hi}, %2;\n\tcvt.f32.f16 %0, lo;\n\tcvt.f32.f16 %1, hi;\n\t}"
      : "=f"(f.x), "=f"(f.y)
      : "r"(h));
  return f;
}

// 8 weights of one code word -> f[0..7] = E2M1 · 2^-14 (weight j of the word in f[j]).
__device__ __forceinline__ void decode8(uint32_t w, float* f) {
  const float2 p0 = half2_bits_to_float2(e2m1_word_pair_bits<0>(w));
  const float2 p1 = half2_bits_to_float2(e2m1_word_pair_bits<1>(w));
  const float2 p2 = half2_bits_to_float2(e2m1_word_pair_bits<2>(w));
  const float2 p3 = half2_bits_to_float2(e2m1_word_pair_bits<3>(w));
  f[0] = p0.x, f[4] = p0.y;
  f[1] = p1.x, f[5] = p1.y;
  f[2] = p2.x, f[6] = p2.y;
  f[3] = p3.x, f[7] = p3.y;
}

// 16 weights (two code words) -> floats · 2^-14, in weight order (the same values, bit for bit,
// as e2m1_pair_x2m14 byte by byte; the word form just takes fewer instructions).
__device__ __forceinline__ void decode16(uint32_t w0, uint32_t w1, float (&f)[16]) {
  decode8(w0, f);
  decode8(w1, f + 8);
}

// Σ over one 16-weight group of x·E2M1·E4M3: code words w0|w1 (8 bytes), its scale byte `sb`,
// x = the group's 16 activations (16-byte aligned).
__device__ __forceinline__ float group_dot(uint32_t w0, uint32_t w1, uint32_t sb, const bf16_t* x) {
  float wf[16], xf[16];
  decode16(w0, w1, wf);
  unpack8(load_cached(x), xf);
  unpack8(load_cached(x + 8), xf + 8);
  float p = 0.f;
#pragma unroll
  for (int i = 0; i < 16; ++i) p = fmaf(wf[i], xf[i], p);
  return ue4m3_x2p14(sb & 0xFFu) * p;
}

// One 16-byte code chunk (32 weights) and its 2 scale bytes for each of R rows.
template <int R>
struct Nvfp4Chunk {
  uint4 q[R];
  uint32_t sc[R];
};

// Loads chunk c of every row (codes[r], scales[r]: the row's first byte). Weights only: may run
// before pdl_wait (launch.cuh).
template <int R>
__device__ __forceinline__ void load_chunk(const uint8_t* const (&codes)[R], const uint8_t* const (&scales)[R], int c,
                                           Nvfp4Chunk<R>& k) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    k.q[r] = load_stream(codes[r] + int64_t(c) * 16);
    k.sc[r] = __ldcs(reinterpret_cast<const unsigned short*>(scales[r] + int64_t(c) * 2));
  }
}

// acc[r][t] += chunk c of row r · token t's activations (x + t·x_stride), group by group: each
// 16-weight group summed in fp32 from 0, then acc = fma(scale, group sum, acc).
template <int R, int NT>
__device__ __forceinline__ void accumulate_chunk(const Nvfp4Chunk<R>& k, const bf16_t* x, int64_t x_stride, int nt,
                                                 int c, float (&acc)[R][NT]) {
#pragma unroll
  for (int g = 0; g < 2; ++g) {  // the chunk's two 16-weight groups
    float wf[R][16];
    float s[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      decode16(g == 0 ? k.q[r].x : k.q[r].z, g == 0 ? k.q[r].y : k.q[r].w, wf[r]);
      s[r] = ue4m3_x2p14((k.sc[r] >> (8 * g)) & 0xFFu);
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t < nt) {
        const bf16_t* xp = x + t * x_stride + int64_t(c) * 32 + g * 16;
        float xf[16];
        unpack8(load_cached(xp), xf);
        unpack8(load_cached(xp + 8), xf + 8);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float p = 0.f;
#pragma unroll
          for (int i = 0; i < 16; ++i) p = fmaf(wf[r][i], xf[i], p);
          acc[r][t] = fmaf(s[r], p, acc[r][t]);
        }
      }
    }
  }
}

// One warp: R NVFP4 weight rows (codes[r], scales[r]: the row's first byte) against one shared
// activation row x (token t at x + t·x_stride), up to NT tokens, nt live. Each lane takes 16-byte
// code chunks (32 weights, 2 scale bytes) part·32+lane, stepping 32·parts (split-K over warps).
// A group's 16 activations are loaded and widened once per token and used by all R rows.
// Returns the warp-reduced Σ x·E2M1·E4M3 WITHOUT scale2 in every lane.
template <int R, int NT>
__device__ __forceinline__ void warp_dot_nvfp4(const uint8_t* const (&codes)[R], const uint8_t* const (&scales)[R],
                                               const bf16_t* x, int64_t x_stride, int nt, int in,
                                               float (&acc)[R][NT], int part = 0, int parts = 1) {
  const int lane = threadIdx.x & 31;
  const int chunks = in / 32;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.f;
#pragma unroll(NT == 1 ? 2 : 1)
  for (int c = part * 32 + lane; c < chunks; c += 32 * parts) {
    Nvfp4Chunk<R> k;
    load_chunk<R>(codes, scales, c, k);
    accumulate_chunk<R, NT>(k, x, x_stride, nt, c, acc);
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = warp_sum(acc[r][t]);
}

// Early weights: a lane's first two chunks (c0 = part·32+lane and c0 + 32·parts) are loaded by
// warp_dot_nvfp4_prologue_mma, which a kernel calls between pdl_launch_dependents and pdl_wait, so
// their DRAM latency overlaps the previous kernel's tail; warp_dot_nvfp4_early_mma then keeps two
// chunks in flight (a chunk's registers are refilled with the chunk two steps ahead right after it
// is consumed).
template <int R>
struct Nvfp4Prologue {
  Nvfp4Chunk<R> a, b;
};

// ---- One-token dot products on tensor cores ("diagonal" mma.sync) ----
// Every lane keeps its own chunks and its own activations, as warp_dot_nvfp4 does; the decode gives
// bf16 weights E2M1·E4M3·2^-8 (nvfp4_pair_bf16, ~2-2.4 instructions per weight instead of ~4.9 for the
// fp16 → fp32 decode, the scale's decode and the fmaf chain) and m16n8k16 MMAs sum them: rows 2p and 2p + 1 of
// the warp's R are an MMA's rows g and g + 8 in every lane group g (so each group's four lanes hold
// the same two rows), and lane (g, t)'s activations fill column g of B. Column g of the product then
// pairs lane group g's weights with its own activations, so the diagonal D[g][g] (lane t = g/2) is
// that group's share of row 2p and D[g + 8][g] of row 2p + 1 (mma_diagonal_row_sums, tensor_core.cuh).
// The 16 k values of an MMA span a chunk's two scale groups (the scale is inside each weight), so the
// sum's order differs from accumulate_chunk's group-by-group fmaf chain: other bits, same FLINT.md §4
// products and fp32 accumulation. Returns Σ x·E2M1·E4M3 WITHOUT scale2 (2^8 restored) in every lane.
// The loop is warp-uniform (mma.sync needs every lane): a lane past the row's last chunk decodes zeros.

// Activations j and j + 4 of 8 (one 16-byte load) as a bf16x2, j in the low half: the pairing of
// nvfp4_pair_bf16's weights.
__device__ __forceinline__ uint32_t act_pair_bf16(const uint4& q, int j) {
  const uint32_t lo = j < 2 ? q.x : q.y, hi = j < 2 ? q.z : q.w;
  return __byte_perm(lo, hi, (j & 1) ? 0x7632 : 0x5410);
}

__device__ __forceinline__ uint32_t code_word(const uint4& q, int i) {
  return i == 0 ? q.x : i == 1 ? q.y : i == 2 ? q.z : q.w;
}

template <int R>
__device__ __forceinline__ void zero_chunk(Nvfp4Chunk<R>& k) {
#pragma unroll
  for (int r = 0; r < R; ++r) k.q[r] = make_uint4(0, 0, 0, 0), k.sc[r] = 0u;
}

// Code word i of a chunk of rows top and bottom (weights 8i..8i+7; a / b: their group's scale as
// ue4m3_bf16x2_x2p118_bits) as mma A fragments: f0 = weight pairs 0/1, f1 = pairs 2/3 — MMA rows g
// (top) and g + 8 (bottom), k slots 2t, 2t+1 and 2t+8, 2t+9 of the lane. D: the pair decode's form
// (nvfp4_bits.h E2m1Pairs).
template <E2m1Pairs D = E2m1Pairs::kMultiply>
__device__ __forceinline__ void code_word_fragments(uint32_t wt, uint32_t a, uint32_t wb, uint32_t b,
                                                    uint32_t (&f0)[4], uint32_t (&f1)[4]) {
  f0[0] = nvfp4_pair_bf16<0, D>(wt, a), f0[1] = nvfp4_pair_bf16<0, D>(wb, b);
  f0[2] = nvfp4_pair_bf16<1, D>(wt, a), f0[3] = nvfp4_pair_bf16<1, D>(wb, b);
  f1[0] = nvfp4_pair_bf16<2, D>(wt, a), f1[1] = nvfp4_pair_bf16<2, D>(wb, b);
  f1[2] = nvfp4_pair_bf16<3, D>(wt, a), f1[3] = nvfp4_pair_bf16<3, D>(wb, b);
}

// Code word i against the word's 8 activations x: weight pairs 0/1 into chain d0, 2/3 into d1.
template <E2m1Pairs D = E2m1Pairs::kMultiply>
__device__ __forceinline__ void mma_code_word(uint32_t wt, uint32_t a, uint32_t wb, uint32_t b, const uint4& x,
                                              float (&d0)[4], float (&d1)[4]) {
  uint32_t f0[4], f1[4];
  code_word_fragments<D>(wt, a, wb, b, f0, f1);
  mma_m16n8k16(d0, f0, act_pair_bf16(x, 0), act_pair_bf16(x, 1));
  mma_m16n8k16(d1, f1, act_pair_bf16(x, 2), act_pair_bf16(x, 3));
}

// One 16-byte code chunk (32 weights) of rows top and bottom, their 2 canonical scale bytes each (st, sb), against
// the chunk's 32 activations xq: 8 MMAs into chains d0, d1.
template <E2m1Pairs D = E2m1Pairs::kMultiply>
__device__ __forceinline__ void mma_chunk_pair(const uint4& qt, uint32_t st, const uint4& qb, uint32_t sb,
                                               const uint4 (&xq)[4], float (&d0)[4], float (&d1)[4]) {
  uint32_t a[2], b[2];  // canonical scale bytes (nvfp4_scales.h)
  ue4m3x2_bf16x2_x2p118_bits(st, a[0], a[1]);
  ue4m3x2_bf16x2_x2p118_bits(sb, b[0], b[1]);
#pragma unroll
  for (int i = 0; i < 4; ++i)  // scale group i / 2
    mma_code_word<D>(code_word(qt, i), a[i / 2], code_word(qb, i), b[i / 2], xq[i], d0, d1);
}

// d[p][0..1]: row pair p's two MMA accumulator chains (pairs 0/1 and 2/3 of each code word).
// kSharedX: x is a shared-memory row (load_x; the kernels that normalise h themselves).
template <int R, bool kSharedX = false, E2m1Pairs D = E2m1Pairs::kMultiply>
__device__ __forceinline__ void accumulate_chunk_mma(const Nvfp4Chunk<R>& k, const bf16_t* x, bool live, int c,
                                                     float (&d)[R / 2][2][4]) {
  static_assert(R % 2 == 0, "rows go to the MMA in pairs");
  uint4 xq[4];
#pragma unroll
  for (int i = 0; i < 4; ++i)  // zeros past the row: 0·x would still be NaN for a NaN x
    xq[i] = live ? load_x<kSharedX>(x + int64_t(c) * 32 + i * 8) : make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int p = 0; p < R / 2; ++p)
    mma_chunk_pair<D>(k.q[2 * p], k.sc[2 * p], k.q[2 * p + 1], k.sc[2 * p + 1], xq, d[p][0], d[p][1]);
}

// kOnePair: the caller has checked nvfp4_one_pair_per_lane(in, parts) — every lane holds exactly one pair
// of chunks (Flint's hidden 2048 at one warp per row), all inside the row, so the prologue loads the
// warp's whole share and the dot products need no loop, no refills and no zero-filled chunks or
// activations for lanes past the row (session 39's all-live form took the predicates and zero fills
// away, 12 % of the executed instructions; the loop's live pointers still held it at 124 registers).
// Same loads, same MMAs in the same order as the general form: same bits.
__host__ __device__ constexpr bool nvfp4_one_pair_per_lane(int in, int parts) { return in == 2 * 32 * 32 * parts; }

// The prologue: a lane past the row's chunks holds zeros.
template <int R, bool kOnePair = false>
__device__ __forceinline__ void warp_dot_nvfp4_prologue_mma(const uint8_t* const (&codes)[R],
                                                            const uint8_t* const (&scales)[R], int in,
                                                            Nvfp4Prologue<R>& pr, int part = 0, int parts = 1) {
  const int chunks = in / 32, step = 32 * parts;
  const int c0 = part * 32 + (threadIdx.x & 31);
  if (kOnePair || c0 < chunks) load_chunk<R>(codes, scales, c0, pr.a);
  else zero_chunk<R>(pr.a);
  if (kOnePair || c0 + step < chunks) load_chunk<R>(codes, scales, c0 + step, pr.b);
  else zero_chunk<R>(pr.b);
}

// The dot products of R rows (R even) against one token x after the prologue.
template <int R, bool kSharedX = false, E2m1Pairs D = E2m1Pairs::kMultiply, bool kOnePair = false>
__device__ __forceinline__ void warp_dot_nvfp4_early_mma(Nvfp4Prologue<R>& pr, const uint8_t* const (&codes)[R],
                                                         const uint8_t* const (&scales)[R], const bf16_t* x, int in,
                                                         float (&acc)[R][1], int part = 0, int parts = 1) {
  const int lane = threadIdx.x & 31;
  const int chunks = in / 32, step = 32 * parts;
  float d[R / 2][2][4];
  mma_diagonal_zero<R>(d);
  if constexpr (kOnePair) {
    const int c = part * 32 + lane;
    accumulate_chunk_mma<R, kSharedX, D>(pr.a, x, true, c, d);
    accumulate_chunk_mma<R, kSharedX, D>(pr.b, x, true, c + step, d);
  } else {
    for (int b = part * 32; b < chunks; b += 2 * step) {  // warp-uniform; lane's chunk c = b + lane
      const int c = b + lane;
      accumulate_chunk_mma<R, kSharedX, D>(pr.a, x, c < chunks, c, d);
      if (b + 2 * step < chunks) {
        if (c + 2 * step < chunks) load_chunk<R>(codes, scales, c + 2 * step, pr.a);
        else zero_chunk<R>(pr.a);
      }
      if (b + step < chunks) {
        accumulate_chunk_mma<R, kSharedX, D>(pr.b, x, c + step < chunks, c + step, d);
        if (b + 3 * step < chunks) {
          if (c + 3 * step < chunks) load_chunk<R>(codes, scales, c + 3 * step, pr.b);
          else zero_chunk<R>(pr.b);
        }
      }
    }
  }
  mma_diagonal_row_sums<R>(d, kNvfp4PairUnscale, acc);
}

}  // namespace striker::cuda
