// libFuzzer target: arbitrary bytes as a GGUF file. Parsing, then reading every metadata value
// through the typed accessors and every tensor's first and last byte, may only succeed or throw
// striker::Error; anything else (crash, sanitizer report, other exception) is a bug.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "loaders/gguf.h"

namespace {

template <class F>
void ignore_error(F&& f) {
  try {
    f();
  } catch (const striker::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto g = striker::GgufFile::parse({reinterpret_cast<const std::byte*>(data), size}, "fuzz.gguf");
    for (const auto& kv : g.kvs) {
      ignore_error([&] { g.get_int(kv.key); });
      ignore_error([&] { g.get_float(kv.key); });
      ignore_error([&] { g.get_bool(kv.key); });
      ignore_error([&] { g.get_string(kv.key); });
      ignore_error([&] { g.get_int_array(kv.key); });
      ignore_error([&] { g.get_float_array(kv.key); });
      ignore_error([&] { g.get_string_array(kv.key); });
    }
    unsigned sum = 0;
    for (const auto& t : g.tensors) {
      if (g.data_offset + t.offset + t.nbytes > size) __builtin_trap();
      if (t.nbytes > 0) sum += unsigned(g.tensor_data(t)[0]) + unsigned(g.tensor_data(t)[t.nbytes - 1]);
      (void)t.torch_shape();
    }
    (void)sum;
  } catch (const striker::Error&) {
  }
  return 0;
}
