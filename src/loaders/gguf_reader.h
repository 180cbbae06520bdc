// GGUF v3 container reader (reference/formats.md §1–§2). mmaps the file, parses metadata and
// tensor records, and validates everything against hostile input before any use: counts are
// bounded by the bytes left, strings and arrays by the file size, dims by overflow checks,
// offsets by the data section, overlaps and alignment are checked. Errors name the file and
// the record at fault.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace striker {

enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
  BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

// ggml tensor type ids we know the block geometry of (formats.md §2).
enum class GgmlType : uint32_t { F32 = 0, F16 = 1, Q8_0 = 8, BF16 = 30, MXFP4 = 39, NVFP4 = 40 };

struct GgufValue {
  GgufType type = GgufType::UINT8;
  GgufType elem_type = GgufType::UINT8;  // for ARRAY (the element's type; nested arrays allowed)
  nlohmann::json value;                  // numbers, bool, string, or array of those
};

struct GgufTensor {
  std::string name;
  uint32_t type = 0;                 // ggml type id
  std::vector<int64_t> ne;           // innermost first, as in the file (1..4 dims)
  uint64_t offset = 0;               // relative to the data section
  const std::byte* data = nullptr;   // inside the mapping
  uint64_t nbytes = 0;

  // PyTorch-order shape ([out, in] for a linear weight).
  std::vector<int64_t> torch_shape() const { return {ne.rbegin(), ne.rend()}; }
};

class GgufFile {
 public:
  // Throws striker::Error on anything malformed.
  static std::unique_ptr<GgufFile> open(const std::string& path);
  // Parses an in-memory image (used by the fuzzer); `bytes` must outlive the object.
  static std::unique_ptr<GgufFile> parse(const std::byte* bytes, size_t size, const std::string& name);

  const std::string& path() const { return path_; }
  uint32_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* find(const std::string& name) const;
  const GgufValue* find_kv(const std::string& key) const;

 private:
  std::string path_;
  std::shared_ptr<void> mapping_;
  uint32_t alignment_ = 32;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> index_;
};

// Block geometry of a ggml type: weights per block and bytes per block; false when unknown.
bool ggml_block_geometry(uint32_t type, int64_t& block_weights, int64_t& block_bytes);
std::string ggml_type_name(uint32_t type);

}  // namespace striker
