#include "loaders/safetensors.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "core/error.h"
#include "loaders/strict_json.h"

namespace striker {

using nlohmann::json;

namespace {

struct DtypeInfo {
  std::string_view name;
  uint32_t bits;
  bool supported;
  DType dtype;
};

// Every dtype string of the format (reference/formats.md §6). Unsupported ones still have
// their sizes checked so that the whole file is validated; using them is an error later.
constexpr DtypeInfo kDtypes[] = {
    {"BOOL", 8, true, DType::BOOL},      {"F4", 4, false, DType::U8},
    {"F6_E2M3", 6, false, DType::U8},    {"F6_E3M2", 6, false, DType::U8},
    {"U8", 8, true, DType::U8},          {"I8", 8, true, DType::I8},
    {"F8_E5M2", 8, false, DType::U8},    {"F8_E4M3", 8, false, DType::U8},
    {"F8_E8M0", 8, false, DType::U8},    {"F8_E4M3FNUZ", 8, false, DType::U8},
    {"F8_E5M2FNUZ", 8, false, DType::U8}, {"I16", 16, true, DType::I16},
    {"U16", 16, false, DType::U8},       {"F16", 16, true, DType::F16},
    {"BF16", 16, true, DType::BF16},     {"I32", 32, true, DType::I32},
    {"U32", 32, false, DType::U8},       {"F32", 32, true, DType::F32},
    {"C64", 64, false, DType::U8},       {"F64", 64, true, DType::F64},
    {"I64", 64, true, DType::I64},       {"U64", 64, false, DType::U8},
};

const DtypeInfo* find_dtype(std::string_view s) {
  for (const auto& d : kDtypes)
    if (d.name == s) return &d;
  return nullptr;
}

uint64_t read_u64_le(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | uint64_t(p[i]);
  return v;
}

// One header entry turned into a SafetensorsTensor, or an Error naming the tensor.
SafetensorsTensor parse_entry(const std::string& name, const json& e, uint64_t buffer_bytes,
                              const std::string& source) {
  const std::string where = source + ": tensor " + quote(name) + ": ";
  if (!e.is_object()) throw Error(where + "header entry must be an object");
  for (const auto& [k, v] : e.items()) {
    (void)v;
    if (k != "dtype" && k != "shape" && k != "data_offsets")
      throw Error(where + "unknown header field " + quote(k));
  }
  SafetensorsTensor t;
  t.name = name;

  auto dt = e.find("dtype");
  if (dt == e.end() || !dt->is_string()) throw Error(where + "'dtype' must be a string");
  t.dtype_name = dt->get<std::string>();
  const DtypeInfo* info = find_dtype(t.dtype_name);
  if (info == nullptr) throw Error(where + "unknown dtype " + quote(t.dtype_name));
  t.dtype_supported = info->supported;
  t.dtype = info->dtype;

  auto sh = e.find("shape");
  if (sh == e.end() || !sh->is_array()) throw Error(where + "'shape' must be a list of integers");
  uint64_t numel = 1;
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX))
      throw Error(where + "'shape' must hold non-negative integers");
    uint64_t dim = d.get<uint64_t>();
    if (__builtin_mul_overflow(numel, dim, &numel)) throw Error(where + "shape product overflows");
    t.shape.push_back(int64_t(dim));
  }
  uint64_t bits = 0;
  if (__builtin_mul_overflow(numel, uint64_t(info->bits), &bits) || numel > uint64_t(INT64_MAX))
    throw Error(where + "shape product overflows");
  if (bits % 8 != 0) throw Error(where + "shape does not fill whole bytes for dtype " + t.dtype_name);
  const uint64_t expected_bytes = bits / 8;

  auto off = e.find("data_offsets");
  if (off == e.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    throw Error(where + "'data_offsets' must be [begin, end] with non-negative integers");
  t.begin = (*off)[0].get<uint64_t>();
  t.end = (*off)[1].get<uint64_t>();
  if (t.end < t.begin)
    throw Error(where + "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "] are reversed");
  if (t.end > buffer_bytes)
    throw Error(where + "data ends at byte " + std::to_string(t.end) + " of a " + std::to_string(buffer_bytes) +
                "-byte data buffer (file truncated?)");
  if (t.nbytes() != expected_bytes)
    throw Error(where + "data_offsets span " + std::to_string(t.nbytes()) + " bytes but " + t.dtype_name +
                " shape needs " + std::to_string(expected_bytes));
  return t;
}

}  // namespace

const SafetensorsTensor* SafetensorsHeader::find(const std::string& name) const {
  auto it = index.find(name);
  return it == index.end() ? nullptr : &tensors[it->second];
}

SafetensorsHeader parse_safetensors(std::span<const std::byte> file, const std::string& source) {
  if (file.size() < 8)
    throw Error(source + ": file is " + std::to_string(file.size()) + " bytes, too short for a safetensors header");
  const uint64_t header_len = read_u64_le(file.data());
  if (header_len > kMaxSafetensorsHeaderBytes)
    throw Error(source + ": header length " + std::to_string(header_len) + " exceeds the " +
                std::to_string(kMaxSafetensorsHeaderBytes) + "-byte limit (not a safetensors file?)");
  if (header_len > file.size() - 8)
    throw Error(source + ": header length " + std::to_string(header_len) + " runs past the end of the " +
                std::to_string(file.size()) + "-byte file");
  if (header_len < 2 || file[8] != std::byte{'{'})
    throw Error(source + ": header must be a JSON object starting with '{'");

  std::string_view text(reinterpret_cast<const char*>(file.data() + 8), size_t(header_len));
  // Entries nest three deep (root, tensor entry, shape list); ranks are small.
  json j = parse_json_strict(text, source, JsonLimits{3, 64});
  if (!j.is_object()) throw Error(source + ": header must be a JSON object");

  SafetensorsHeader h;
  h.data_start = 8 + header_len;
  const uint64_t buffer_bytes = file.size() - h.data_start;
  for (const auto& [name, entry] : j.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw Error(source + ": __metadata__ must be an object of strings");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) throw Error(source + ": __metadata__ entry " + quote(k) + " must be a string");
        h.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    h.tensors.push_back(parse_entry(name, entry, buffer_bytes, source));
  }

  // The data buffer must be covered exactly: sorted by offset, each tensor starts where the
  // previous one ended, and the last one ends at the end of the file.
  std::sort(h.tensors.begin(), h.tensors.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const SafetensorsTensor* previous = nullptr;
  for (const auto& t : h.tensors) {
    if (t.begin < expected)
      throw Error(source + ": tensor " + quote(t.name) + " overlaps tensor " + quote(previous->name) +
                  " (data_offsets begin " + std::to_string(t.begin) + " < " + std::to_string(expected) + ")");
    if (t.begin > expected)
      throw Error(source + ": " + std::to_string(t.begin - expected) + "-byte hole in the data buffer before tensor " +
                  quote(t.name));
    expected = t.end;
    previous = &t;
  }
  if (expected != buffer_bytes)
    throw Error(source + ": data buffer is " + std::to_string(buffer_bytes) + " bytes but the tensors cover " +
                std::to_string(expected) + " (trailing bytes or a missing tensor)");
  for (size_t i = 0; i < h.tensors.size(); ++i) h.index.emplace(h.tensors[i].name, i);
  return h;
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  SafetensorsFile f;
  f.map = std::make_shared<MappedFile>(path);
  f.header = parse_safetensors(f.map->bytes(), path.string());
  return f;
}

}  // namespace striker
