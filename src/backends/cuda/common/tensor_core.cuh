// The sm_80+ building blocks the tensor-core kernels share (grouped MoE, prefill and decode
// attention): cp.async staging into shared memory, ldmatrix fragment loads, one bf16 mma.sync
// m16n8k16 tile with fp32 accumulators, and packing two floats into a bf16x2 register.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/common/device_math.cuh"

namespace striker::cuda {

// 16-byte global -> shared copy; when !full the destination is zero-filled and nothing is read
// (rows past a range must be zeros, not stale data: 0 times a stale NaN would still be NaN).
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
// One arrival on the mbarrier `bar` (shared::cta address) once all of this thread's earlier
// cp.async have completed; .noinc: it counts as one of the barrier's expected arrivals.
__device__ __forceinline__ void cp_async_mbar_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16_t* smem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(s));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16_t* smem) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
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

// The "diagonal" use of mma_m16n8k16 by the NVFP4 one-token dot products (nvfp4_decode.cuh):
// weight rows 2p and 2p + 1 are MMA rows g and g + 8 in every lane group g, and
// lane (g, t) puts its own activations into column g of B, so D[g][g] is lane group g's share of row
// 2p and D[g + 8][g] of row 2p + 1 (held by lane t = g / 2; the other columns are never read).
// d[p][0..1]: row pair p's two accumulator chains. acc[2p][0], acc[2p + 1][0] = the rows' sums over
// the warp, times `scale`, in every lane.
template <int R>
__device__ __forceinline__ void mma_diagonal_row_sums(const float (&d)[R / 2][2][4], float scale,
                                                      float (&acc)[R][1]) {
  const int g = (threadIdx.x & 31) >> 2;
  const bool diagonal = (threadIdx.x & 3) == (g >> 1);
  const bool odd = g & 1;  // element 1 / 3, not 0 / 2 (selects: an indexed local array would spill)
#pragma unroll
  for (int p = 0; p < R / 2; ++p) {
    const float top = diagonal ? (odd ? d[p][0][1] + d[p][1][1] : d[p][0][0] + d[p][1][0]) : 0.f;
    const float bottom = diagonal ? (odd ? d[p][0][3] + d[p][1][3] : d[p][0][2] + d[p][1][2]) : 0.f;
    acc[2 * p][0] = warp_sum(top) * scale;
    acc[2 * p + 1][0] = warp_sum(bottom) * scale;
  }
}

template <int R>
__device__ __forceinline__ void mma_diagonal_zero(float (&d)[R / 2][2][4]) {
#pragma unroll
  for (int p = 0; p < R / 2; ++p)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) d[p][j][e] = 0.f;
}

// Two floats rounded to bf16 (nearest-even), lo in the low half.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const uint32_t l = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
  const uint32_t h = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
  return l | (h << 16);
}

}  // namespace striker::cuda
