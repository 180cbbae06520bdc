// --block-size, shared by `striker serve` and `striker bench throughput` (vLLM's engine flag).
#pragma once
#include <cstdint>
#include <string>

namespace striker::cli {

// Throws unless block_size is one of vLLM's choices (1, 8, 16, 32, 64, 128) and the device takes it:
// the CPU backend takes every one; the CUDA backend 16 and up (its decode attention reads 16-key tiles
// that span at most two blocks; tests/cuda: CudaAttention.DecodeWithLargerCacheBlocks,
// CudaBackend.*WithLargerCacheBlocks). `who` prefixes the message ("" for serve, "bench throughput: ").
void check_block_size(const std::string& who, int32_t block_size, const std::string& device);

}  // namespace striker::cli
