// libFuzzer target: the GGUF container parser must reject or accept any byte string without
// crashing, hanging or reading outside the buffer.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "loaders/gguf_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = striker::GgufFile::parse(reinterpret_cast<const std::byte*>(data), size, "fuzz.gguf");
    // Touch every tensor's first and last byte: they must lie inside the input.
    volatile uint8_t sink = 0;
    for (const auto& t : f->tensors())
      if (t.nbytes) sink = sink ^ uint8_t(t.data[0]) ^ uint8_t(t.data[t.nbytes - 1]);
  } catch (const striker::Error&) {
  }
  return 0;
}
