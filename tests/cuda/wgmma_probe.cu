// Test-only probe of the wgmma prefill kernel's building blocks in isolation (one warpgroup, one
// CTA): S = A·Kᵀ through the K-major descriptors and O = P·V through the N-major ones, with the
// tiles written where the kernel's staging writes them (tile_offset). If the prefill tests fail,
// these two say which operand path is wrong (test_wgmma_probe.cpp).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "backends/cuda/attention/attention_prefill_layout.h"
#include "backends/cuda/attention/attention_prefill_wgmma_layout.h"
#include "backends/cuda/attention/wgmma_sm90.cuh"
#include "backends/cuda/common/cuda_check.h"
#include "wgmma_probe.h"

namespace striker::cuda::testing {
namespace {

using namespace prefill::wg;
using prefill::acc_col;
using prefill::kChunks;
using prefill::kHeadDim;
using prefill::acc_half;
using prefill::q_frag_dim;
using prefill::q_frag_half;

// a: [64][128] bf16 row-major (the A rows), b: [128][128] bf16 [key][dim], out: [64][128] fp32.
// kTrans 0: out = a · bᵀ (b as the K tile); kTrans 1: out = a · b (b as the V tile), with the V
// descriptor's leading and stride byte offsets as the kernel sets them or, swap_v, exchanged
// (a diagnostic for the one layout rule the host tests cannot settle).
template <int kTrans>
__global__ void __launch_bounds__(128)
    wgmma_probe_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, bool swap_v, float* out) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + kSwizzleAtomBytes - 1) & ~uint32_t(kSwizzleAtomBytes - 1);
  unsigned char* tile = smem_raw + (base - raw);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2;
  for (int i = tid; i < kKeyTile * kChunks; i += 128) {
    const int key = i / kChunks, chunk = i % kChunks;
    *reinterpret_cast<uint4*>(tile + tile_offset(key, chunk)) =
        *reinterpret_cast<const uint4*>(b + key * kHeadDim + chunk * 8);
  }
  wgmma::fence_proxy_async_shared();
  __syncthreads();
  uint32_t af[8][4];
  for (int ks = 0; ks < 8; ++ks)
    for (int i = 0; i < 4; ++i) {
      const int row = 16 * warp + g + 8 * q_frag_half(i);
      af[ks][i] = *reinterpret_cast<const uint32_t*>(a + row * 128 + q_frag_dim(lane, ks, i));
    }
  float d[16][4] = {};
  wgmma::fence();
  for (int ks = 0; ks < 8; ++ks) {
    const uint64_t desc = !kTrans ? smem_desc(k_desc_start(base, ks), kKLbo, kSbo)
                          : swap_v  ? smem_desc(v_desc_start(base, ks), kSbo, kVLbo)
                                    : smem_desc(v_desc_start(base, ks), kVLbo, kSbo);
    wgmma::mma_m64n128k16_rs<kTrans>(d, af[ks], desc, 1);
  }
  wgmma::commit_group();
  wgmma::wait_group<0>();
  wgmma::fence_operands(d);
  for (int j = 0; j < 16; ++j)
    for (int i = 0; i < 4; ++i)
      out[(16 * warp + g + 8 * acc_half(i)) * 128 + 8 * j + acc_col(lane, i)] = d[j][i];
}

}  // namespace

void wgmma_probe(const bf16* a, const bf16* b, WgmmaProbe mode, float* out) {
  const bool values = mode != WgmmaProbe::kScores, swap_v = mode == WgmmaProbe::kValuesSwappedOffsets;
  const auto* pa = reinterpret_cast<const __nv_bfloat16*>(a);
  const auto* pb = reinterpret_cast<const __nv_bfloat16*>(b);
  const size_t smem = kTileBytes + kSwizzleAtomBytes;
  if (values) {
    STRIKER_CUDA_CHECK(cudaFuncSetAttribute(wgmma_probe_kernel<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    wgmma_probe_kernel<1><<<1, 128, smem>>>(pa, pb, swap_v, out);
  } else {
    STRIKER_CUDA_CHECK(cudaFuncSetAttribute(wgmma_probe_kernel<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    wgmma_probe_kernel<0><<<1, 128, smem>>>(pa, pb, false, out);
  }
  STRIKER_CUDA_CHECK(cudaGetLastError());
  STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace striker::cuda::testing
