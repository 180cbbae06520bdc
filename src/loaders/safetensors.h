// safetensors reader (reference/formats.md §6): 8-byte LE header length, a JSON header naming
// every tensor's dtype, shape and byte range, then the data. The header is validated
// completely before any tensor is used, because the file may be hostile: dtypes, shape
// products, byte ranges (in range, not reversed, matching dtype×shape, covering the buffer
// with no hole or overlap) and __metadata__ (string→string).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace striker {

// Headers larger than this are refused (huggingface_hub's limit; a full Flint header is ~5 MB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 25'000'000;

struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;        // as written in the file, e.g. "BF16", "F8_E4M3"
  bool dtype_supported = false;  // dtype_name maps onto a striker DType
  DType dtype = DType::U8;       // valid when dtype_supported
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;   // relative to the start of the data buffer
  uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
  uint64_t data_start = 0;       // file offset of the data buffer (8 + header length)
  std::vector<SafetensorsTensor> tensors;        // in the order of their byte ranges
  std::map<std::string, std::string> metadata;   // __metadata__
  std::map<std::string, size_t> index;           // name -> position in `tensors`

  const SafetensorsTensor* find(const std::string& name) const;
};

// Validates a whole file image; throws striker::Error "<source>: ..." (one line) on any fault.
SafetensorsHeader parse_safetensors(std::span<const std::byte> file, const std::string& source);

// An open, validated safetensors file: the mapping plus its header.
struct SafetensorsFile {
  std::shared_ptr<MappedFile> map;
  SafetensorsHeader header;

  static SafetensorsFile open(const std::filesystem::path& path);
  const std::byte* data_of(const SafetensorsTensor& t) const { return map->data() + header.data_start + t.begin; }
};

}  // namespace striker
