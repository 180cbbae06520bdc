// --load-format dummy on the host: random Flint weights made in memory from config.json alone
// (no weight file is opened), for the CPU backend. BF16 weights are exactly what `striker
// make-model --seed S` writes; NVFP4 weights are those values quantised as `striker quantize`
// does (per-16 UE4M3 scales, a global scale per matrix), held in model/nvfp4.h's split layout.
#pragma once
#include <cstdint>

#include "model/weight_bytes.h"
#include "model/weights.h"

namespace striker {

// Host bytes make_dummy_model allocates for `config` in `format`.
int64_t dummy_host_bytes(const FlintConfig& config, LinearFormat format);

// Host memory this process may still use: the least of MemAvailable, the address-space
// limit (ulimit -v) and the cgroup's memory.max less what it already holds.
int64_t host_memory_available();

// Random weights in memory. Throws striker::Error (naming the config and the sizes) when they
// would not fit in host_memory_available() with 1 GiB to spare.
LoadedModel make_dummy_model(const FlintConfig& config, uint64_t seed, LinearFormat format);

}  // namespace striker
