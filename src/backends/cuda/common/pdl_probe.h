// A probe, not a model kernel: it exists only so the kernel benchmark can measure the floor of a
// chain of dependent (PDL) launches — what one launch costs when the kernel does nothing — against
// which the decode kernels' times are read (docs/performance.md).
#pragma once

#include <cuda_runtime_api.h>

namespace striker::cuda {

// One launch of an empty kernel (pdl_grid_start only) with `blocks` blocks, as a dependent launch
// of whatever ran before it on `stream`.
void launch_empty_pdl(int blocks, cudaStream_t stream);

}  // namespace striker::cuda
