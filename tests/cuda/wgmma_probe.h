// Test-only launcher of wgmma_probe.cu (one warpgroup, one wgmma chain; see there).
#pragma once
#include "core/bf16.h"

namespace striker::cuda::testing {

// kScores: out = a·bᵀ (b staged as the K tile); kValues: out = a·b (b staged as the V tile);
// kValuesSwappedOffsets: the same with the V descriptor's leading and stride byte offsets
// exchanged, and kScoresSmemA: kScores with A read from shared memory (SS form) instead of
// registers (diagnostics only: which assignment the hardware wants if kValues fails; whether a
// kScores failure is the register A layout or the K descriptor).
enum class WgmmaProbe { kScores, kValues, kValuesSwappedOffsets, kScoresSmemA };

// a: [64][128], b: [128][128] ([key][dim]) bf16 on the device; out: [64][128] fp32 on the device.
void wgmma_probe(const bf16* a, const bf16* b, WgmmaProbe mode, float* out);

}  // namespace striker::cuda::testing
