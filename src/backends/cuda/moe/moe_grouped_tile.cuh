// Building blocks of the grouped expert GEMM (moe_grouped.cu): cp.async staging, the swizzled
// shared-memory tile layout, the weight policies (BF16; NVFP4 as decoded tiles or register fragments) and
// one warp's mma.sync over a k tile.
//
// Tile shapes and the index arithmetic (swizzle, fragment addresses) live in
// moe_grouped_layout.h, where a host test checks them against the PTX fragment definitions.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/moe/moe_grouped_layout.h"
#include "backends/cuda/nvfp4/nvfp4_bf16_bits.h"
#include "backends/cuda/common/tensor_core.cuh"

namespace striker::cuda {

// cp.async pipeline depth: 3 stages where they fit in 48 KiB of shared memory, else 2. Staying
// within 48 KiB needs no cudaFuncSetAttribute opt-in, which could not be issued safely while a
// CUDA graph is being captured; the 2-stage kernels (gate/up) run 4-6 CTAs per SM instead.
constexpr int grouped_stages(int tm, int nb) { return (tm + nb * kBN) * kBK * 2 * 3 <= 48 * 1024 ? 3 : 2; }
// How a policy's weights reach the MMAs (grouped_gemm_kernel has one pipeline for each):
//   SharedRing    cp.async copies bf16 tiles into a ring of shared-memory stages (BF16);
//   DecodedTiles  codes loaded into registers kFetchAhead k tiles ahead, decoded into shared-memory
//                 bf16 tiles, read by ldmatrix (NVFP4, 64-row tiles);
//   Fragments     codes loaded into registers kFetchAhead k tiles ahead, each warp decoding its own
//                 straight into its mma B fragments: no shared memory, no barrier for the weights
//                 (NVFP4, 16-row tiles). With 64-row tiles the accumulators and the A fragments
//                 push that kernel to 206 registers (2 CTAs per SM) and it lost 13 % there
//                 (docs/performance.md, thirtieth session), so those keep DecodedTiles.
enum class WeightPath { SharedRing, DecodedTiles, Fragments };

// Stages of the A (activation) ring. SharedRing: A rides in the weight stages. DecodedTiles: the
// A ring gets the shared memory the B stages leave, up to fetch_ahead + 2 stages, so each A tile
// (an L2 gather) is requested about as far ahead as the codes. Fragments: the 48 KiB are A's alone.
constexpr int grouped_a_stages(int tm, int nb, WeightPath path, int fetch_ahead) {
  if (path == WeightPath::SharedRing) return grouped_stages(tm, nb);
  const int b_bytes = path == WeightPath::DecodedTiles ? grouped_stages(tm, nb) * nb * kBN * kBK * 2 : 0;
  const int fit = (48 * 1024 - b_bytes) / (tm * kBK * 2);
  return fit < fetch_ahead + 2 ? fit : fetch_ahead + 2;
}
constexpr int grouped_smem_bytes(int tm, int nb, WeightPath path, int fetch_ahead) {
  const int b_stages = path == WeightPath::Fragments ? 0 : grouped_stages(tm, nb);
  return (grouped_a_stages(tm, nb, path, fetch_ahead) * tm + b_stages * nb * kBN) * kBK * 2;
}
static_assert(grouped_a_stages(16, 2, WeightPath::Fragments, 4) == 6 &&
                  grouped_a_stages(16, 1, WeightPath::Fragments, 4) == 6,
              "fragments: a 6-deep A ring");
static_assert(grouped_a_stages(64, 2, WeightPath::DecodedTiles, 4) >= 2 &&
                  grouped_a_stages(64, 1, WeightPath::DecodedTiles, 4) >= 2,
              "decoded 64-row tiles: at least the B stages' depth");

// Weight policies: how the kernel gets the NB matrices (gate and up, or down) of expert e at output
// columns n0.., k tile k0.. (zeros past the matrix edge) into its MMAs, along their kPath:
//   SharedRing, DecodedTiles: fetch(staged, dst, ...) issues the global reads of the swizzled
//     [kBN rows][kBK] bf16 tile for stage `dst` (BF16: cp.async straight into it; NVFP4: codes and
//     scales into registers, `staged`); DecodedTiles' commit(staged, dst) decodes them into `dst`
//     with plain st.shared, into a stage no warp reads before the next __syncthreads.
//   Fragments: fetch_fragments(staged, ...) loads a warp's own codes into registers and
//     mma(sa, staged, ...) decodes them into its B fragments and multiplies.
// output_scale(e, j) is the factor the epilogue applies to matrix j's fp32 accumulator before the
// bf16 rounding (1 for BF16, the expert's global scale2 for NVFP4, FLINT.md §4).
// Expert id shared_expert (E, when moe_route_sort sorted the shared expert's rows in; -1 when not)
// takes the shared expert's own matrices ([n, kdim] each) instead of a slice of the stacks.

// BF16 experts stacked as [E, n, kdim] row-major (one pointer per matrix). kShared: the launch has
// the shared expert's tiles (a separate instance, so the plain kernels keep their registers).
template <bool kShared = false>
struct Bf16ExpertWeights {
  static constexpr int kMinBlocks = 1;
  const bf16_t* m[2];
  const bf16_t* shared_m[2] = {nullptr, nullptr};
  int shared_expert = -1;
  struct Staged {};
  static constexpr WeightPath kPath = WeightPath::SharedRing;
  static constexpr int kFetchAhead = 0;  // cp.async lands in shared memory: the ring is the fetch-ahead

  template <int NB>
  __device__ __forceinline__ void fetch(Staged&, bf16_t* dst, int e, int n0, int k0, int n, int kdim) const {
    const int tid = threadIdx.x;
    const int chunk = stage_chunk(tid);
    const int k = k0 + chunk * 8;
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      const bf16_t* base = kShared && e == shared_expert ? shared_m[j] : m[j] + int64_t(e) * n * kdim;
#pragma unroll
      for (int i = 0; i < kBN * 8 / kGroupedThreads; ++i) {
        const int r = stage_row(tid, i);
        const bool ok = n0 + r < n && k < kdim;
        cp_async16(dst + j * kBN * kBK + swizzled(r, chunk), ok ? base + int64_t(n0 + r) * kdim + k : base, ok);
      }
    }
  }
  template <int NB>
  __device__ __forceinline__ void commit(const Staged&, bf16_t*) const {}
  __device__ __forceinline__ float output_scale(int /*expert*/, int /*matrix*/) const { return 1.f; }
};

// NVFP4 experts in the split layout of nvfp4_linear.h, stacked per expert: codes [E·n, kdim/2],
// UE4M3 scales [E·n, kdim/16], scale2 [E] per matrix; kdim % 64 == 0 (FLINT.md §3), so a k tile
// never straddles the matrix edge. E2M1 × E4M3 is exact in bf16 (nvfp4_gemv.cu): both policies
// below give the MMAs the same values the dequantise + cuBLASLt path multiplied.
struct Nvfp4Stacks {
  const uint8_t* codes[2];
  const uint8_t* scales[2];
  const float* scale2[2];  // device [E] each
  const uint8_t* shared_codes[2] = {nullptr, nullptr};  // the shared expert's matrices [n, kdim]
  const uint8_t* shared_scales[2] = {nullptr, nullptr};
  float shared_scale2[2] = {1.f, 1.f};
  int shared_expert = -1;
};

// The policies' view of the stacks; kShared as for Bf16ExpertWeights.
template <bool kShared>
struct Nvfp4Rows : Nvfp4Stacks {
  static constexpr int kMinBlocks = 1;
  __device__ __forceinline__ float output_scale(int expert, int matrix) const {
    if (kShared && expert == shared_expert) return shared_scale2[matrix];
    return __ldg(scale2[matrix] + expert);
  }
  // Matrix j's codes and scales of row `row` of expert e (n rows per expert).
  // (One select of the matrix's base per call, the row offset shared: the 16-row gate/up instance
  // for grids wider than the machine must stay within its 96 registers.)
  __device__ __forceinline__ const uint8_t* code_row(int j, int e, int row, int n, int kdim) const {
    const int64_t per = int64_t(kdim / 2);
    const uint8_t* base = codes[j] + int64_t(e) * n * per;
    if constexpr (kShared) base = e == shared_expert ? shared_codes[j] : base;
    return base + row * per;
  }
  __device__ __forceinline__ const uint8_t* scale_row(int j, int e, int row, int n, int kdim) const {
    const int64_t per = int64_t(kdim / 16);
    const uint8_t* base = scales[j] + int64_t(e) * n * per;
    if constexpr (kShared) base = e == shared_expert ? shared_scales[j] : base;
    return base + row * per;
  }
};

// DecodedTiles: thread tid covers tile row nvfp4_tile_row(tid) and the half nvfp4_tile_half(tid) of
// the 64 k values: one 16-byte code load (32 weights) and one 2-byte scale load per matrix, which
// become 16-byte chunks 4·half .. 4·half+3 of that row.
template <bool kShared = false>
struct Nvfp4TileWeights : Nvfp4Rows<kShared> {
  static constexpr WeightPath kPath = WeightPath::DecodedTiles;
  struct Staged {
    uint4 q[2];
    uint32_t s[2];
    bool ok;
  };
  // A k tile's codes and scales must sit in registers until they are decoded, so the shared-memory
  // stages alone would keep one k tile (4.25 KiB for gate + up per CTA) in flight and pay a DRAM
  // round trip per k tile. Four register slots (~11 registers each for gate + up) keep four more
  // in flight: ~17 KiB per CTA (docs/performance.md, twenty-eighth session).
  static constexpr int kFetchAhead = 4;

  template <int NB>
  __device__ __forceinline__ void fetch(Staged& st, bf16_t*, int e, int n0, int k0, int n, int kdim) const {
    const int tid = threadIdx.x;
    const int row = n0 + nvfp4_tile_row(tid);
    const int k = k0 + nvfp4_tile_half(tid) * 32;
    st.ok = row < n;
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      if (st.ok) {
        // Cached in L2 only (as the BF16 policy's cp.async.cg): the other row tiles of this
        // expert read the same weight tile, so it must not be marked evict-first.
        st.q[j] = __ldcg(reinterpret_cast<const uint4*>(this->code_row(j, e, row, n, kdim) + k / 2));
        st.s[j] = __ldcg(reinterpret_cast<const unsigned short*>(this->scale_row(j, e, row, n, kdim) + k / 16));
      } else {
        st.q[j] = make_uint4(0u, 0u, 0u, 0u);  // rows past the edge: zeros (code 0 = +0)
        st.s[j] = 0u;
      }
    }
  }

  template <int NB>
  __device__ __forceinline__ void commit(const Staged& st, bf16_t* dst) const {
    const int tid = threadIdx.x;
    const int r = nvfp4_tile_row(tid), half = nvfp4_tile_half(tid);
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      const uint32_t words[4] = {st.q[j].x, st.q[j].y, st.q[j].z, st.q[j].w};
#pragma unroll
      for (int c = 0; c < 4; ++c) {  // word c = weights 8c..8c+7 of this half, scale byte c/2
        // E2M1 by byte-permute tables straight into bf16, times the scale as bf16 (nvfp4_bf16_bits.h):
        // the exact E2M1·E4M3 the fp16 → fp32 → × scale → bf16 decode gave, in ~3.5 instructions per
        // weight instead of ~6.
        const uint32_t s = ue4m3_bf16x2_bits((st.s[j] >> (8 * (c >> 1))) & 0xFFu);
        uint32_t packed[4];
        e2m1x4_to_bf16x2(words[c], packed[0], packed[1]);
        e2m1x4_to_bf16x2(words[c] >> 16, packed[2], packed[3]);
#pragma unroll
        for (int b = 0; b < 4; ++b) packed[b] = bf16x2_mul(packed[b], s);
        *reinterpret_cast<uint4*>(dst + j * kBN * kBK + swizzled(r, half * 4 + c)) =
            make_uint4(packed[0], packed[1], packed[2], packed[3]);
      }
    }
  }
};

// Fragments: no shared-memory tile. Lane (g, c) of the warp owning output columns wn..wn+15 loads,
// per matrix and k tile, scale group c (8 code bytes, 1 scale byte) of its rows wn+g and wn+8+g, and
// decodes it into its own mma B fragments in the k order of nvfp4_pair_frag_k (moe_grouped_layout.h):
// weights j and j + 4 of a code word become one bf16x2 of E2M1·E4M3·2^-8 (nvfp4_pair_bf16: the
// pair's bits by AND, IMAD, AND and a bf16x2 multiply, no table). It replaced a table decode in the
// natural pair order (~3.5 instructions per weight with its sign multiplies and the tables'
// registers re-made under register pressure): gate/up -5..-8 %, resident-A down -12 % (thirty-second session).
// Through shared memory (DecodedTiles) the tile's st.shared / ldmatrix round trips behind a barrier
// were the 16-row kernels' largest stall (docs/performance.md, thirtieth session).
template <bool kShared = false>
struct Nvfp4FragmentWeights : Nvfp4Rows<kShared> {
  static constexpr WeightPath kPath = WeightPath::Fragments;
  struct Staged {
    uint2 q[2][2];      // [matrix][n tile]: the 16 codes of scale group c
    uint32_t s[2][2];   // its scale byte
  };
  // k tiles whose codes a lane keeps in flight in registers (6 registers per matrix each).
  static constexpr int kFetchAhead = 4;

  template <int NB>
  __device__ __forceinline__ void fetch_fragments(Staged& st, int e, int wn, int k0, int n, int kdim) const {
    const int lane = threadIdx.x & 31;
    const int group = nvfp4_frag_group(lane);
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const int row = wn + 8 * t + (lane >> 2);
#pragma unroll
      for (int j = 0; j < NB; ++j) {
        if (row < n) {
          // Cached in L2 only: the other row tiles of this expert read the same weights.
          st.q[j][t] = __ldcg(reinterpret_cast<const uint2*>(this->code_row(j, e, row, n, kdim) + k0 / 2 + 8 * group));
          st.s[j][t] = __ldcg(this->scale_row(j, e, row, n, kdim) + k0 / 16 + group);
        } else {
          st.q[j][t] = make_uint2(0u, 0u);  // rows past the edge: zeros (code 0 = +0)
          st.s[j][t] = 0u;
        }
      }
    }
  }

  // The weights carry 2^-8 (nvfp4_pair_bf16): scale2 · 2^8 goes into the fp32 sums before the bf16
  // rounding, which gives the bits of scale2 · (the unscaled sums): the scaling by 2^-8 is exact for
  // every product and partial sum (all normal), and the tensor cores' sums scale with it.
  __device__ __forceinline__ float output_scale(int expert, int matrix) const {
    return Nvfp4Rows<kShared>::output_scale(expert, matrix) * kNvfp4PairUnscale;
  }

  // acc[m][j][t] += rows 16m.. of the A stage (swizzled [TM][kBK]) times this warp's columns of
  // matrix j, n tile t, over one k tile, the B fragments decoded from `st` step by step: step
  // ks = 2p + q takes code word p of the group, pairs (2q, 2q+4) into b0 and (2q+1, 2q+5) into b1
  // (nvfp4_pair_frag_k), and the A halves paired to match from words q and q+2 of chunk 2c+p.
  template <int TM, int NB>
  __device__ __forceinline__ void mma(const bf16_t* sa, const Staged& st, int lane,
                                      float (&acc)[TM / 16][NB][2][4]) const {
    const int g = lane >> 2;
    uint32_t scale[NB][2];
#pragma unroll
    for (int j = 0; j < NB; ++j)
#pragma unroll
      for (int t = 0; t < 2; ++t) scale[j][t] = ue4m3_bf16x2_x2p118_bits(st.s[j][t]);
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      uint4 ar[TM / 16][2];  // rows 16m+g and 16m+8+g: chunk 2c+p (activations 16c+8p..16c+8p+7)
#pragma unroll
      for (int m = 0; m < TM / 16; ++m)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          ar[m][h] = *reinterpret_cast<const uint4*>(sa + swizzled(16 * m + 8 * h + g, nvfp4_frag_a_chunk(lane, p)));
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        uint32_t bf[NB][2][2];
#pragma unroll
        for (int j = 0; j < NB; ++j)
#pragma unroll
          for (int t = 0; t < 2; ++t) {
            const uint32_t word = p ? st.q[j][t].y : st.q[j][t].x;  // weights 8p..8p+7 of the group
            bf[j][t][0] = q ? nvfp4_pair_bf16<2>(word, scale[j][t]) : nvfp4_pair_bf16<0>(word, scale[j][t]);
            bf[j][t][1] = q ? nvfp4_pair_bf16<3>(word, scale[j][t]) : nvfp4_pair_bf16<1>(word, scale[j][t]);
          }
#pragma unroll
        for (int m = 0; m < TM / 16; ++m) {
          const uint32_t w0 = q ? ar[m][0].y : ar[m][0].x, w2 = q ? ar[m][0].w : ar[m][0].z;  // row g
          const uint32_t v0 = q ? ar[m][1].y : ar[m][1].x, v2 = q ? ar[m][1].w : ar[m][1].z;  // row g+8
          const uint32_t a[4] = {byte_perm(w0, w2, 0x5410u), byte_perm(v0, v2, 0x5410u), byte_perm(w0, w2, 0x7632u),
                                 byte_perm(v0, v2, 0x7632u)};
#pragma unroll
          for (int j = 0; j < NB; ++j)
#pragma unroll
            for (int t = 0; t < 2; ++t) mma_m16n8k16(acc[m][j][t], a, bf[j][t][0], bf[j][t][1]);
        }
      }
    }
  }
};

// The fragment policy for grids wider than the machine (nvfp4_gate_up_many_ctas): two k tiles of
// codes in flight instead of four, which holds the 16-row gate/up kernel to 96 registers (126 with
// four) so 5 CTAs share an SM instead of 4 (3 when it was measured, before the pair decode) — at 16-64
// tokens a grid of ~640-1,600 CTAs then runs in fewer rounds, which outweighs the shallower
// fetch-ahead (docs/performance.md, thirty-second session).
template <bool kShared = false>
struct Nvfp4FragmentWeightsWide : Nvfp4FragmentWeights<kShared> {
  static constexpr int kFetchAhead = 2;
  static constexpr int kMinBlocks = 5;
};

// One warp: rows 0..TM-1 of the A tile times columns wn..wn+15 of each of the NB B tiles over one
// kBK stage. acc[m][j][t] is the m16n8 accumulator of rows 16m.., matrix j, columns wn+8t..
template <int TM, int NB>
__device__ __forceinline__ void warp_tile_mma(const bf16_t* sa, const bf16_t* sb, int wn, int lane,
                                              float (&acc)[TM / 16][NB][2][4]) {
#pragma unroll
  for (int ks = 0; ks < kBK / 16; ++ks) {
    // A: ldmatrix matrices (rows 0-7 | 8-15) × (k 0-7 | 8-15) = fragment registers a0..a3.
    uint32_t af[TM / 16][4];
#pragma unroll
    for (int m = 0; m < TM / 16; ++m) ldmatrix_x4(af[m], sa + swizzled(a_ldm_row(lane, m), a_ldm_chunk(lane, ks)));
    // B (stored n-major, k contiguous = the .col operand): matrices (n 0-7, k 0-7), (n 0-7, k 8-15),
    // (n 8-15, k 0-7), (n 8-15, k 8-15) = b0, b1 of n tile 0, then of n tile 1.
    uint32_t bf[NB][4];
#pragma unroll
    for (int j = 0; j < NB; ++j)
      ldmatrix_x4(bf[j], sb + j * kBN * kBK + swizzled(b_ldm_row(lane, wn), b_ldm_chunk(lane, ks)));
#pragma unroll
    for (int m = 0; m < TM / 16; ++m)
#pragma unroll
      for (int j = 0; j < NB; ++j)
#pragma unroll
        for (int t = 0; t < 2; ++t) mma_m16n8k16(acc[m][j][t], af[m], bf[j][2 * t], bf[j][2 * t + 1]);
  }
}

}  // namespace striker::cuda
