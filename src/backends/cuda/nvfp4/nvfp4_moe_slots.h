// Which token a routed slot of the per-slot NVFP4 MoE grid belongs to (slot = token·K + k), written
// once for host and device so tests/cuda/host/test_nvfp4_moe_slots.cpp checks the arithmetic the
// device relies on, for every slot a launch can have.
#pragma once

#ifdef __CUDACC__
#define STRIKER_MOE_SLOTS_FN __host__ __device__ __forceinline__
#else
#define STRIKER_MOE_SLOTS_FN inline
#endif

namespace striker::cuda {

// slot / K for 0 <= slot < 65536 (one launch's grid rows) and K >= 1, without the integer division's ~20
// instructions: (slot + 1/2) / K lies at least 1/(2K) from an integer, and the device's approximate
// division (__fdividef: MUFU.RCP and a multiply, within 2 ulp of a quotient below 65536 / K) is off by
// less than 2^-6 / K, so truncation gives the exact quotient. The host divides correctly rounded.
STRIKER_MOE_SLOTS_FN float slot_token_dividend(int slot) { return float(slot) + 0.5f; }

STRIKER_MOE_SLOTS_FN int slot_token(int slot, int K) {
#ifdef __CUDA_ARCH__
  return int(__fdividef(slot_token_dividend(slot), float(K)));
#else
  return int(slot_token_dividend(slot) / float(K));
#endif
}

}  // namespace striker::cuda
