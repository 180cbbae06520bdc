// Where piece u (elements 8u..8u+7) of a one-token activation row sits when a kernel forms the row in
// shared memory for the NVFP4 dot products (rmsnorm_row.cuh block_rmsnorm_row<true>, read by
// nvfp4_decode.cuh accumulate_chunk_mma). Kept free of device code so a host test
// (tests/cuda/host/test_activation_pieces.cpp) checks its bank groups without a GPU.
//
// Lane c reads its chunk's 64 bytes as pieces 4c..4c+3, so a quarter warp's 8 lanes read 16-byte pieces 64
// bytes apart — in plain order only 2 of the 8 16-byte bank groups, a 4-way conflict on each of a warp's loads
// (16 shared-memory wavefronts instead of 4: ~3,000 cycles of the shared-memory pipe per SM for the QKV GEMV's
// 24 warps, all right after the norm's barrier). Piece u at u xor ((u >> 3) & 3) permutes the pieces inside
// each 64-byte chunk, so the quarter warp's 8 pieces fall in 8 bank groups and a warp's stores of 32
// consecutive elements still cover 64 contiguous bytes.
#pragma once

#include "backends/cuda/common/host_device.h"

namespace striker::cuda {

STRIKER_HOST_DEVICE constexpr int x_piece_slot(int u) { return u ^ ((u >> 3) & 3); }

}  // namespace striker::cuda
