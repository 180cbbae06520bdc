// The --block-size check shared by `serve` and `bench throughput`: vLLM's choices on every device,
// 16 tokens and up on --device cuda (its decode attention reads 16-key tiles spanning at most two
// blocks; the 32-128 block sizes pass the GPU tests CudaAttention.DecodeWithLargerCacheBlocks and
// CudaBackend.ForwardMatchesHostReferenceWithLargerCacheBlocks). CI has no GPU, so `serve --device
// cuda` stops at the device before this check: it is tested here directly.
#include <gtest/gtest.h>

#include "cli/cache_flags.h"
#include "core/error.h"

namespace striker::cli {
namespace {

TEST(CacheFlags, BlockSizeChoicesPerDevice) {
  for (int32_t b : {1, 8, 16, 32, 64, 128}) EXPECT_NO_THROW(check_block_size("", b, "cpu")) << b;
  for (int32_t b : {16, 32, 64, 128}) EXPECT_NO_THROW(check_block_size("", b, "cuda")) << b;
  for (int32_t b : {1, 8}) {
    try {
      check_block_size("bench throughput: ", b, "cuda");
      ADD_FAILURE() << "block size " << b << " accepted on cuda";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("bench throughput: --block-size " + std::to_string(b) +
                                           ": --device cuda needs blocks of 16 tokens or more"),
                std::string::npos)
          << e.what();
    }
  }
  for (int32_t b : {0, -16, 12, 24, 256}) {
    for (const char* device : {"cpu", "cuda"}) EXPECT_THROW(check_block_size("", b, device), Error) << b << device;
  }
}

}  // namespace
}  // namespace striker::cli
