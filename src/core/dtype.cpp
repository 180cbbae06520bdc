#include "core/dtype.h"

namespace striker {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::BF16: case DType::F16: case DType::I16: return 2;
    case DType::F32: case DType::I32: return 4;
    case DType::F64: case DType::I64: return 8;
    case DType::I8: case DType::U8: case DType::BOOL: return 1;
    case DType::NVFP4: return 0;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::BF16: return "BF16";
    case DType::F16: return "F16";
    case DType::F32: return "F32";
    case DType::F64: return "F64";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
    case DType::I16: return "I16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::BOOL: return "BOOL";
    case DType::NVFP4: return "NVFP4";
  }
  return "?";
}

bool dtype_from_safetensors(std::string_view s, DType& out) {
  static constexpr struct { std::string_view name; DType t; } table[] = {
      {"BF16", DType::BF16}, {"F16", DType::F16}, {"F32", DType::F32}, {"F64", DType::F64},
      {"I8", DType::I8},     {"U8", DType::U8},   {"I16", DType::I16}, {"I32", DType::I32},
      {"I64", DType::I64},   {"BOOL", DType::BOOL}};
  for (const auto& e : table)
    if (e.name == s) { out = e.t; return true; }
  return false;
}

}  // namespace striker
