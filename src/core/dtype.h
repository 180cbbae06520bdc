// Element types found in checkpoints (safetensors and GGUF) and used by the backends.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace striker {

enum class DType : uint8_t {
  BF16,
  F16,
  F32,
  F64,
  I8,
  U8,
  I16,
  I32,
  I64,
  BOOL,
  NVFP4,  // GGUF type 40: 36-byte blocks of 64 weights (FLINT.md §3)
};

// Bytes per element; 0 for block-quantised types (use the block helpers instead).
size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
// safetensors dtype strings ("BF16", "F32", ...); returns false when unknown.
bool dtype_from_safetensors(std::string_view s, DType& out);

}  // namespace striker
