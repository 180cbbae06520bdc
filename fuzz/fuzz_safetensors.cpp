// libFuzzer target: arbitrary bytes as a safetensors file. Any outcome other than a parsed
// header or a striker::Error (a crash, a sanitizer report, another exception) is a bug.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "loaders/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto h = striker::parse_safetensors({reinterpret_cast<const std::byte*>(data), size}, "fuzz.safetensors");
    // Touch what a loader would: every tensor's bytes must lie inside the input.
    unsigned sum = 0;
    for (const auto& t : h.tensors) {
      if (h.data_start + t.end > size) __builtin_trap();
      if (t.nbytes() > 0) sum += data[h.data_start + t.begin] + data[h.data_start + t.end - 1];
    }
    (void)sum;
  } catch (const striker::Error&) {
  }
  return 0;
}
