// Building blocks of the grouped expert GEMM (moe_grouped.cu): cp.async staging, the swizzled
// shared-memory tile layout, the weight-tile loader policy and one warp's mma.sync over a k tile.
//
// Tile shapes and the index arithmetic (swizzle, fragment addresses) live in
// moe_grouped_layout.h, where a host test checks them against the PTX fragment definitions.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/device_math.cuh"
#include "backends/cuda/moe_grouped_layout.h"

namespace striker::cuda {


// cp.async pipeline depth: 3 stages where they fit in 48 KiB of shared memory, else 2. Staying
// within 48 KiB needs no cudaFuncSetAttribute opt-in, which could not be issued safely while a
// CUDA graph is being captured; the 2-stage kernels (gate/up) run 4-6 CTAs per SM instead.
constexpr int grouped_stages(int tm, int nb) { return (tm + nb * kBN) * kBK * 2 * 3 <= 48 * 1024 ? 3 : 2; }
constexpr int grouped_smem_bytes(int tm, int nb) { return grouped_stages(tm, nb) * (tm + nb * kBN) * kBK * 2; }

// 16-byte global -> shared copy; when !full the destination is zero-filled and nothing is read.
__device__ __forceinline__ void cp_async16(bf16_t* smem, const bf16_t* gmem, bool full) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(full ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16_t* smem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}

// d += a·b for one m16n8k16 tile (bf16 inputs, fp32 accumulators).
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Weight-tile loader policy for BF16 experts stacked as [E, n, kdim] row-major (one pointer per
// matrix: gate and up, or down). load_tile fills, for each of NB matrices, the swizzled
// [kBN rows][kBK] bf16 tile of expert e at rows n0.., columns k0.. (zeros past the matrix edge).
//
// An NVFP4 (W4A16) policy slots in with the same two members: load_tile reads the rows' 36-byte
// blocks (4 E4M3 scale bytes + 32 code bytes per 64 weights, FLINT.md §3) with ordinary global
// loads, dequantises E2M1 × E4M3 into bf16 in registers — exact, the product has at most 5
// significant bits — and stores them to the same swizzled layout with st.shared (the kernel's
// __syncthreads after each stage covers plain stores as well as cp.async); output_scale returns
// the expert's fp32 global scale2, which the epilogue applies before rounding, as FLINT.md §4's
// mm for NVFP4 requires. The kernel is templated on the policy, so nothing else changes.
struct Bf16ExpertWeights {
  const bf16_t* m[2];

  template <int NB>
  __device__ __forceinline__ void load_tile(bf16_t* dst, int e, int n0, int k0, int n, int kdim) const {
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
  __device__ __forceinline__ float output_scale(int /*expert*/, int /*matrix*/) const { return 1.f; }
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
