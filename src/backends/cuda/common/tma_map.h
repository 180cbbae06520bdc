// Host side of TMA: CUtensorMap descriptors for 2D bf16 matrices, built with the driver's
// cuTensorMapEncodeTiled. The driver entry point is fetched through the runtime
// (cudaGetDriverEntryPointByVersion), so nothing links libcuda directly: the binaries keep
// linking only the static runtime, and the map is a plain 128-byte value passed to the kernel as
// a __grid_constant__ parameter (so a captured graph keeps its own copy).
#pragma once
#include <cuda.h>

#include <cstdint>

#include "core/bf16.h"

namespace striker::cuda {

// A row-major [rows, cols] bf16 matrix (row stride `cols` elements, a multiple of 8, base 16-byte
// aligned) read in tiles of box_rows × 64 columns into 128B-swizzled shared memory
// (wgmma_layout.h). Reads outside the matrix fill zeros. Throws striker::Error with `what` on
// any bad argument or driver failure.
CUtensorMap make_tma_map_bf16_sw128(const bf16* base, int64_t rows, int64_t cols, int box_rows, const char* what);

// A row-major [rows, cols] byte matrix (row stride `cols`, a multiple of 16; base 16-byte aligned)
// read in unswizzled boxes of box_rows × box_cols bytes (box_cols a multiple of 16, <= 256): the
// box lands row after row in shared memory (128-byte aligned). Reads outside fill zeros.
CUtensorMap make_tma_map_u8(const uint8_t* base, int64_t rows, int64_t cols, int box_rows, int box_cols,
                            const char* what);

}  // namespace striker::cuda
