// GGUF v3 writer (reference/formats.md §1): metadata, tensor records, 32-byte aligned data.
// Tensor bytes are produced by a callback at write time, so a 40B-parameter model is
// quantised tensor by tensor without holding it in memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loaders/gguf.h"

namespace striker {

class GgufWriter {
 public:
  void add(const std::string& key, GgufValueType type, nlohmann::json value, GgufValueType elem_type = GgufValueType::U8);
  void add_u32(const std::string& key, uint32_t v) { add(key, GgufValueType::U32, v); }
  void add_f32(const std::string& key, float v) { add(key, GgufValueType::F32, v); }
  void add_bool(const std::string& key, bool v) { add(key, GgufValueType::BOOL, v); }
  void add_string(const std::string& key, const std::string& v) { add(key, GgufValueType::STRING, v); }

  // ne is innermost first (a PyTorch [out, in] weight is ne = {in, out}). `fill` writes exactly
  // the tensor's byte size into the buffer it is given.
  using Fill = std::function<void(std::byte* dst, size_t nbytes)>;
  void add_tensor(const std::string& name, uint32_t ggml_type, std::vector<int64_t> ne, Fill fill);

  // Writes the whole file; throws striker::Error naming the path on I/O failure.
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string key;
    GgufValueType type;
    GgufValueType elem_type;
    nlohmann::json value;
  };
  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<int64_t> ne;
    uint64_t nbytes;
    Fill fill;
  };
  std::vector<Entry> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace striker
