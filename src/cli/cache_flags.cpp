#include "cli/cache_flags.h"

#include <algorithm>
#include <iterator>

#include "core/error.h"

namespace striker::cli {

void check_block_size(const std::string& who, int32_t block_size, const std::string& device) {
  static constexpr int32_t kChoices[] = {1, 8, 16, 32, 64, 128};
  if (std::find(std::begin(kChoices), std::end(kChoices), block_size) == std::end(kChoices))
    throw Error(who + "--block-size must be one of 1, 8, 16, 32, 64, 128, got " + std::to_string(block_size));
  // The CUDA decode attention reads 16-key tiles, each spanning at most two cache blocks.
  if (device == "cuda" && block_size < 16)
    throw Error(who + "--block-size " + std::to_string(block_size) +
                ": --device cuda needs blocks of 16 tokens or more (16, 32, 64, 128)");
}

}  // namespace striker::cli
