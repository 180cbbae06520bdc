// Test-only probe of the prefill kernel's wgmma building blocks in isolation (one warpgroup, one
// CTA): S = A·Kᵀ through the K-major descriptors and O = P·V through the N-major ones, with the
// tiles written where the kernel's staging writes them (tile_offset). If the prefill tests fail,
// these two say which operand path is wrong (test_wgmma_probe.cpp).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "backends/cuda/attention/attention_prefill_layout.h"
#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/wgmma.cuh"
#include "wgmma_probe.h"

namespace striker::cuda::testing {
namespace {

using namespace prefill;

// The SS form (A from shared memory too, K-major like the K tile): only the probe uses it, to
// tell a wrong register A layout from a wrong B descriptor.
__device__ __forceinline__ void mma_m64n128k16_ss(float (&d)[16][4], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, 1, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
        "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
        "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
        "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
        "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
        "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
        "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
        "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3]),
        "+f"(d[8][0]), "+f"(d[8][1]), "+f"(d[8][2]), "+f"(d[8][3]),
        "+f"(d[9][0]), "+f"(d[9][1]), "+f"(d[9][2]), "+f"(d[9][3]),
        "+f"(d[10][0]), "+f"(d[10][1]), "+f"(d[10][2]), "+f"(d[10][3]),
        "+f"(d[11][0]), "+f"(d[11][1]), "+f"(d[11][2]), "+f"(d[11][3]),
        "+f"(d[12][0]), "+f"(d[12][1]), "+f"(d[12][2]), "+f"(d[12][3]),
        "+f"(d[13][0]), "+f"(d[13][1]), "+f"(d[13][2]), "+f"(d[13][3]),
        "+f"(d[14][0]), "+f"(d[14][1]), "+f"(d[14][2]), "+f"(d[14][3]),
        "+f"(d[15][0]), "+f"(d[15][1]), "+f"(d[15][2]), "+f"(d[15][3])
      : "l"(desc_a), "l"(desc_b));
}

// A descriptor with its leading and stride byte offsets exchanged.
__host__ __device__ constexpr uint64_t swapped_offsets(uint64_t desc) {
  const uint64_t lbo = (desc >> 16) & 0x3FFF, sbo = (desc >> 32) & 0x3FFF;
  return (desc & ~((uint64_t(0x3FFF) << 16) | (uint64_t(0x3FFF) << 32))) | (sbo << 16) | (lbo << 32);
}

// a: [64][128] bf16 row-major (the A rows), b: [128][128] bf16 [key][dim], out: [64][128] fp32.
// kTrans 0: out = a · bᵀ (b as the K tile); kTrans 1: out = a · b (b as the V tile), with the V
// descriptor's leading and stride byte offsets as the kernel sets them or, swap_v, exchanged
// (a diagnostic for the one layout rule the host tests cannot settle).
// smem_a (scores only): A staged like the K tile and read through a K-major descriptor (SS form).
template <int kTrans>
__global__ void __launch_bounds__(128)
    wgmma_probe_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, bool swap_v, bool smem_a, float* out) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + kSw128AtomBytes - 1) & ~uint32_t(kSw128AtomBytes - 1);
  unsigned char* tile = smem_raw + (base - raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2;
  for (int i = tid; i < kKeyTile * kChunks; i += 128) {
    const int key = i / kChunks, chunk = i % kChunks;
    *reinterpret_cast<uint4*>(tile + tile_offset(key, chunk)) =
        *reinterpret_cast<const uint4*>(b + key * kHeadDim + chunk * 8);
  }
  const uint32_t a_tile = base + kTileBytes;
  for (int i = tid; i < 64 * kChunks; i += 128) {
    const int row = i / kChunks, chunk = i % kChunks;
    *reinterpret_cast<uint4*>(tile + kTileBytes + tile_offset(row, chunk)) =
        *reinterpret_cast<const uint4*>(a + row * kHeadDim + chunk * 8);
  }
  fence_proxy_async_shared();
  __syncthreads();
  uint32_t af[8][4];
  for (int ks = 0; ks < 8; ++ks)
    for (int i = 0; i < 4; ++i) {
      const int row = 16 * warp + g + 8 * q_frag_half(i);
      af[ks][i] = *reinterpret_cast<const uint32_t*>(a + row * 128 + q_frag_dim(lane, ks, i));
    }
  float d[16][4] = {};
  wgmma_fence();
  for (int ks = 0; ks < 8; ++ks) {
    const uint64_t desc = !kTrans ? k_desc(base, ks) : swap_v ? swapped_offsets(v_desc(base, ks)) : v_desc(base, ks);
    if (!kTrans && smem_a)
      mma_m64n128k16_ss(d, k_desc(a_tile, ks), desc);
    else
      wgmma_m64n128k16_bf16_rs<kTrans>(d, af[ks], desc, 1);
  }
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_fence_operands(d);
  for (int j = 0; j < 16; ++j)
    for (int i = 0; i < 4; ++i)
      out[(16 * warp + g + 8 * acc_half(i)) * 128 + 8 * j + acc_col(lane, i)] = d[j][i];
}

}  // namespace

void wgmma_probe(const bf16* a, const bf16* b, WgmmaProbe mode, float* out) {
  const bool values = mode == WgmmaProbe::kValues || mode == WgmmaProbe::kValuesSwappedOffsets;
  const bool swap_v = mode == WgmmaProbe::kValuesSwappedOffsets, smem_a = mode == WgmmaProbe::kScoresSmemA;
  const auto* pa = reinterpret_cast<const __nv_bfloat16*>(a);
  const auto* pb = reinterpret_cast<const __nv_bfloat16*>(b);
  const size_t smem = 2 * kTileBytes + kSw128AtomBytes;
  if (values) {
    STRIKER_CUDA_CHECK(cudaFuncSetAttribute(wgmma_probe_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    wgmma_probe_kernel<1><<<1, 128, smem>>>(pa, pb, swap_v, false, out);
  } else {
    STRIKER_CUDA_CHECK(cudaFuncSetAttribute(wgmma_probe_kernel<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    wgmma_probe_kernel<0><<<1, 128, smem>>>(pa, pb, false, smem_a, out);
  }
  STRIKER_CUDA_CHECK(cudaGetLastError());
  STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace striker::cuda::testing
