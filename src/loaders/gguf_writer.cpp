#include "loaders/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <memory>

#include "core/error.h"

namespace striker {

namespace {

constexpr uint64_t kAlignment = 32;

class Out {
 public:
  explicit Out(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "wb")) {
    if (!f_) throw Error(path + ": cannot create file: " + std::strerror(errno));
  }
  ~Out() {
    if (f_) std::fclose(f_);
  }
  void bytes(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) throw Error(path_ + ": write failed: " + std::strerror(errno));
    pos_ += n;
  }
  template <typename T>
  void put(T v) { bytes(&v, sizeof v); }
  void string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad() {
    static const char zeros[kAlignment] = {};
    bytes(zeros, size_t((kAlignment - pos_ % kAlignment) % kAlignment));
  }
  void close() {
    if (std::fclose(f_) != 0) {
      f_ = nullptr;
      throw Error(path_ + ": close failed: " + std::strerror(errno));
    }
    f_ = nullptr;
  }

 private:
  std::string path_;
  FILE* f_;
  uint64_t pos_ = 0;
};

void write_value(Out& o, GgufValueType t, GgufValueType elem, const nlohmann::json& v) {
  switch (t) {
    case GgufValueType::U8: o.put<uint8_t>(v.get<uint8_t>()); break;
    case GgufValueType::I8: o.put<int8_t>(v.get<int8_t>()); break;
    case GgufValueType::U16: o.put<uint16_t>(v.get<uint16_t>()); break;
    case GgufValueType::I16: o.put<int16_t>(v.get<int16_t>()); break;
    case GgufValueType::U32: o.put<uint32_t>(v.get<uint32_t>()); break;
    case GgufValueType::I32: o.put<int32_t>(v.get<int32_t>()); break;
    case GgufValueType::F32: o.put<float>(v.get<float>()); break;
    case GgufValueType::U64: o.put<uint64_t>(v.get<uint64_t>()); break;
    case GgufValueType::I64: o.put<int64_t>(v.get<int64_t>()); break;
    case GgufValueType::F64: o.put<double>(v.get<double>()); break;
    case GgufValueType::BOOL: o.put<uint8_t>(v.get<bool>() ? 1 : 0); break;
    case GgufValueType::STRING: o.string(v.get<std::string>()); break;
    case GgufValueType::ARRAY:
      o.put<uint32_t>(uint32_t(elem));
      o.put<uint64_t>(v.size());
      for (const auto& e : v) write_value(o, elem, GgufValueType::U8, e);  // one level of nesting
      break;
  }
}

}  // namespace

void GgufWriter::add(const std::string& key, GgufValueType type, nlohmann::json value, GgufValueType elem_type) {
  kv_.push_back({key, type, elem_type, std::move(value)});
}

void GgufWriter::add_tensor(const std::string& name, uint32_t ggml_type, std::vector<int64_t> ne, Fill fill) {
  const GgmlTypeInfo* info = ggml_type_info(ggml_type);
  if (!info) throw Error("GGUF writer: unknown ggml type for " + name);
  const int64_t bw = info->block_elements, bb = info->block_bytes;
  uint64_t elems = 1;
  for (auto n : ne) elems *= uint64_t(n);
  if (ne.empty() || ne[0] % bw != 0) throw Error("GGUF writer: " + name + ": ne[0] is not a multiple of the block size");
  tensors_.push_back({name, ggml_type, std::move(ne), elems / uint64_t(bw) * uint64_t(bb), std::move(fill)});
}

void GgufWriter::write(const std::string& path) const {
  Out o(path);
  o.put<uint32_t>(0x46554747u);
  o.put<uint32_t>(3);
  o.put<uint64_t>(tensors_.size());
  o.put<uint64_t>(kv_.size());
  for (const auto& e : kv_) {
    o.string(e.key);
    o.put<uint32_t>(uint32_t(e.type));
    write_value(o, e.type, e.elem_type, e.value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    o.string(t.name);
    o.put<uint32_t>(uint32_t(t.ne.size()));
    for (auto n : t.ne) o.put<uint64_t>(uint64_t(n));
    o.put<uint32_t>(t.type);
    o.put<uint64_t>(offset);
    offset += (t.nbytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  o.pad();
  std::vector<std::byte> buf;
  for (const auto& t : tensors_) {
    buf.assign(size_t(t.nbytes), std::byte{0});
    t.fill(buf.data(), buf.size());
    o.bytes(buf.data(), buf.size());
    o.pad();
  }
  o.close();
}

}  // namespace striker
