// GGUF v3 container reader (reference/formats.md §1–§2), strict because model files are
// untrusted (reference/server.md §3.4 lists the llama.cpp advisories this guards against):
// every count is bounded by the bytes left in the file before anything is allocated, every
// string and array is bounds-checked, type ids are checked against the ggml table, shape
// products and byte sizes are overflow-checked, and every tensor must lie, aligned and without
// overlap, inside the data section. Metadata arrays stay in the file and are decoded on demand.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"

namespace striker {

enum class GgufValueType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
std::string_view gguf_value_type_name(GgufValueType t);

// ggml tensor types: block size (elements) and bytes per block; blck == 0 for unknown/removed ids.
struct GgmlTypeInfo {
  std::string_view name;
  uint32_t block_elements;
  uint32_t block_bytes;
};
const GgmlTypeInfo* ggml_type_info(uint32_t type_id);  // nullptr when the id is not a valid type
inline constexpr uint32_t kGgmlTypeNvfp4 = 40;
// The striker DType of a ggml type id, when striker can use it (F32, F16, BF16, ints, NVFP4).
std::optional<DType> ggml_type_to_dtype(uint32_t type_id);

struct GgufKV {
  std::string key;
  GgufValueType type;
  // Scalars are decoded: unsigned ints -> uint64_t, signed -> int64_t, floats -> double.
  std::variant<std::monostate, uint64_t, int64_t, double, bool, std::string> scalar;
  // Arrays stay in the file: element type, element count and file offset of the first element.
  GgufValueType array_type = GgufValueType::U8;
  uint64_t array_count = 0;
  uint64_t array_offset = 0;
};

struct GgufTensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  std::array<int64_t, 4> ne{1, 1, 1, 1};  // ne[0] innermost (reversed w.r.t. PyTorch shapes)
  uint32_t type = 0;
  uint64_t offset = 0;                     // relative to the data section
  uint64_t nbytes = 0;
  // PyTorch-order shape (outermost first), e.g. [out, in] for a linear weight.
  std::vector<int64_t> torch_shape() const;
};

class GgufFile {
 public:
  // Validates a whole file image; throws striker::Error "<source>: ..." (one line) on any fault.
  static GgufFile parse(std::span<const std::byte> file, const std::string& source);
  // Maps and parses a file; the mapping lives as long as the GgufFile (or `mapping()` copies).
  static GgufFile open(const std::filesystem::path& path);

  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;  // file offset of the data section
  std::vector<GgufKV> kvs;
  std::vector<GgufTensorInfo> tensors;  // in file order

  const GgufKV* find_kv(std::string_view key) const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;

  // Typed metadata access; nullopt when the key is absent, an Error naming the key when its
  // type does not fit. Integers of any width/sign are accepted where they fit in the result.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;  // any numeric type
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string> get_string(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;
  std::optional<std::vector<double>> get_float_array(std::string_view key) const;
  std::optional<std::vector<std::string>> get_string_array(std::string_view key) const;

  // The bytes of a tensor inside the file image this was parsed from.
  const std::byte* tensor_data(const GgufTensorInfo& t) const { return file_.data() + data_offset + t.offset; }
  const std::shared_ptr<MappedFile>& mapping() const { return map_; }
  const std::string& source() const { return source_; }

 private:
  const GgufKV& typed_kv(std::string_view key, bool array) const;
  std::span<const std::byte> file_;
  std::shared_ptr<MappedFile> map_;
  std::string source_;
  std::map<std::string, size_t, std::less<>> kv_index_, tensor_index_;
};

}  // namespace striker
