// Device helpers shared by the kernels: bf16 rounding as FLINT.md §4 defines it, 16-byte
// vector loads and stores of 8 bf16 values, and warp reductions.
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace striker::cuda {

using bf16_t = __nv_bfloat16;

// bf16(x): round to nearest-even bfloat16 and back to float.
__device__ __forceinline__ float round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Eight bf16 values held in one 16-byte register quad.
__device__ __forceinline__ void unpack8(const uint4& q, float f[8]) {
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

// Eight floats rounded to bf16 (round to nearest even) into one 16-byte register quad.
__device__ __forceinline__ uint4 pack8(const float f[8]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 b = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);  // .x = f[2i] in the low half
    w[i] = *reinterpret_cast<const uint32_t*>(&b);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Streaming load of weights: read once per step, so keep them out of L1.
__device__ __forceinline__ uint4 load_stream(const void* p) {
  return __ldcs(reinterpret_cast<const uint4*>(p));
}

// CTA `part` of `parts` requests its share of [p, p + bytes) into L2, every parts-th 128-byte line
// from line `part` (prefetch.global.L2: one instruction per line, no registers, nothing waits for it).
// Interleaved lines rather than a contiguous slice: the slice's size needed a 64-bit division (~20
// instructions on 32-bit operands, a 77-instruction subroutine otherwise) in every warp of the per-slot
// MoE gate/up's CTAs.
__device__ __forceinline__ void prefetch_l2_part(const void* p, int64_t bytes, int part, int parts) {
  const int64_t stride = int64_t(blockDim.x) * parts * 128;
  for (int64_t off = (int64_t(threadIdx.x) * parts + part) * 128; off < bytes; off += stride)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(static_cast<const char*>(p) + off));
}

__device__ __forceinline__ uint4 load_cached(const void* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

// A row that the kernel in front wrote while this one was already running (programmatic dependent
// launch), read after griddepcontrol.wait: from L2, the point of coherence, never through L1 or
// the read-only path (ld.global.nc / __ldg promises data unchanged for the kernel's lifetime, which
// a PDL-overlapped writer breaks: stale lines of an older h were read). volatile + "memory": the
// load stays below the wait.
__device__ __forceinline__ uint4 load_from_l2(const void* p) {
  uint4 v;
  asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

// Activations of a GEMV-style dot product: from global memory (read-only path), or, kShared, from
// the shared-memory row a kernel formed itself (block_rmsnorm_row).
template <bool kShared>
__device__ __forceinline__ uint4 load_x(const void* p) {
  if constexpr (kShared) return *reinterpret_cast<const uint4*>(p);
  else return load_cached(p);
}

}  // namespace striker::cuda
