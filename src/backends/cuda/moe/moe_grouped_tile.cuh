// Building blocks of the grouped expert GEMM (moe_grouped.cu): cp.async staging, the swizzled
// shared-memory tile layout, the weight-tile loader policy and one warp's mma.sync over a k tile.
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
#include "backends/cuda/nvfp4/nvfp4_decode.cuh"
#include "backends/cuda/common/tensor_core.cuh"

namespace striker::cuda {


// cp.async pipeline depth: 3 stages where they fit in 48 KiB of shared memory, else 2. Staying
// within 48 KiB needs no cudaFuncSetAttribute opt-in, which could not be issued safely while a
// CUDA graph is being captured; the 2-stage kernels (gate/up) run 4-6 CTAs per SM instead.
constexpr int grouped_stages(int tm, int nb) { return (tm + nb * kBN) * kBK * 2 * 3 <= 48 * 1024 ? 3 : 2; }
// Stages of the A (activation) ring. With the cp.async weight ring (fetch_ahead == 0) A rides in the
// same stages. A policy that keeps its weights' loads in registers (NVFP4) would otherwise request
// each A tile (an L2 gather) only one k tile ahead and wait an L2 round trip per k tile, so its A ring
// gets the shared memory the B stages leave, up to fetch_ahead + 2 stages.
constexpr int grouped_a_stages(int tm, int nb, int fetch_ahead) {
  if (fetch_ahead == 0) return grouped_stages(tm, nb);
  const int free_bytes = 48 * 1024 - grouped_stages(tm, nb) * nb * kBN * kBK * 2;
  const int fit = free_bytes / (tm * kBK * 2);
  return fit < fetch_ahead + 2 ? fit : fetch_ahead + 2;
}
constexpr int grouped_smem_bytes(int tm, int nb, int fetch_ahead) {
  return (grouped_a_stages(tm, nb, fetch_ahead) * tm + grouped_stages(tm, nb) * nb * kBN) * kBK * 2;
}
static_assert(grouped_a_stages(16, 2, 4) == 6 && grouped_a_stages(16, 1, 4) == 6, "decode tiles: a 6-deep A ring");
static_assert(grouped_a_stages(64, 2, 4) >= 2 && grouped_a_stages(64, 1, 4) >= 2, "TM = 64: at least the B stages' depth");

// Weight-tile loader policies. A policy fills, for each of NB matrices (gate and up, or down),
// the swizzled [kBN rows][kBK] bf16 tile of expert e at rows n0.., columns k0.. (zeros past the
// matrix edge), in two steps around the warps' MMA of the current stage:
//   fetch(staged, dst, ...)  issues the global reads: BF16 copies straight into `dst` with
//                            cp.async; NVFP4 loads codes and scales into registers (`staged`);
//   commit(staged, dst)      finishes the tile: nothing for BF16; NVFP4 decodes into `dst`.
// The kernel calls fetch before and commit after the MMA of the stage it is computing, so the
// global loads of an NVFP4 tile are in flight while the tensor cores work. commit's plain
// st.shared writes a stage that no warp reads before the next __syncthreads of the main loop.
// output_scale(e, j) is the factor the epilogue applies to matrix j's fp32 accumulator before the
// bf16 rounding (1 for BF16, the expert's global scale2 for NVFP4, FLINT.md §4).
// kFetchAhead: k tiles whose global loads a thread keeps in flight in registers beyond the stages
// in shared memory (0: the cp.async ring alone keeps the loads ahead; see grouped_gemm_kernel).

// BF16 experts stacked as [E, n, kdim] row-major (one pointer per matrix).
struct Bf16ExpertWeights {
  const bf16_t* m[2];
  struct Staged {};
  static constexpr int kFetchAhead = 0;  // cp.async lands in shared memory: the ring is the fetch-ahead

  template <int NB>
  __device__ __forceinline__ void fetch(Staged&, bf16_t* dst, int e, int n0, int k0, int n, int kdim) const {
    const int tid = threadIdx.x;
    const int chunk = stage_chunk(tid);
    const int k = k0 + chunk * 8;
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      const bf16_t* base = m[j] + int64_t(e) * n * kdim;
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
// never straddles the matrix edge. Thread tid covers tile row nvfp4_tile_row(tid) and the half
// nvfp4_tile_half(tid) of the 64 k values: one 16-byte code load (32 weights) and one 2-byte
// scale load per matrix, which become 16-byte chunks 4·half .. 4·half+3 of that row.
// E2M1 × E4M3 is exact in bf16 (nvfp4_gemv.cu), so the tile holds the same values the
// dequantise + cuBLASLt path multiplied.
struct Nvfp4ExpertWeights {
  const uint8_t* codes[2];
  const uint8_t* scales[2];
  const float* scale2[2];  // device [E] each
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
        const int64_t grow = int64_t(e) * n + row;  // row of the stacked [E·n, kdim] matrix
        // Cached in L2 only (as the BF16 policy's cp.async.cg): the other row tiles of this
        // expert read the same weight tile, so it must not be marked evict-first.
        st.q[j] = __ldcg(reinterpret_cast<const uint4*>(codes[j] + grow * (kdim / 2) + k / 2));
        st.s[j] = __ldcg(reinterpret_cast<const unsigned short*>(scales[j] + grow * (kdim / 16) + k / 16));
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
  __device__ __forceinline__ float output_scale(int expert, int matrix) const { return __ldg(scale2[matrix] + expert); }
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
