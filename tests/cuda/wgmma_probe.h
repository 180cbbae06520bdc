// Test-only launcher of wgmma_probe.cu (one warpgroup, one wgmma chain; see there).
#pragma once
#include "core/bf16.h"

namespace striker::cuda::testing {

// a: [64][128], b: [128][128] ([key][dim]) bf16 on the device; out: [64][128] fp32 on the device.
// values false: out = a·bᵀ (b staged as the K tile); true: out = a·b (b staged as the V tile).
void wgmma_probe(const bf16* a, const bf16* b, bool values, float* out);

}  // namespace striker::cuda::testing
