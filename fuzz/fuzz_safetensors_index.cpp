// libFuzzer target: arbitrary bytes as a model.safetensors.index.json. Only a weight map or a
// striker::Error may come out; every shard name must stay a plain file name.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "loaders/safetensors_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto map = striker::parse_safetensors_index(std::string_view(reinterpret_cast<const char*>(data), size),
                                                "fuzz.index.json");
    for (const auto& [tensor, shard] : map)
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "..") __builtin_trap();
  } catch (const striker::Error&) {
  }
  return 0;
}
