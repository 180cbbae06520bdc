#include "loaders/gguf_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace striker {

namespace {

constexpr uint64_t kMaxString = 1ull << 30;       // ggml's GGUF_MAX_STRING_LENGTH
constexpr uint64_t kMaxArray = 1ull << 30;        // ggml's GGUF_MAX_ARRAY_ELEMENTS
constexpr int kMaxArrayDepth = 4;                 // nested arrays: bounded recursion
constexpr size_t kMaxTensorName = 1024;

// A bounds-checked little-endian cursor over the file image.
class Cursor {
 public:
  Cursor(const std::byte* p, size_t n, const std::string& file) : p_(p), n_(n), file_(file) {}
  size_t pos() const { return pos_; }
  size_t left() const { return n_ - pos_; }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(file_ + ": invalid GGUF at byte " + std::to_string(pos_) + ": " + what);
  }
  template <typename T>
  T get(const char* what) {
    if (left() < sizeof(T)) fail(std::string("file ends inside ") + what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const char* what) {
    uint64_t len = get<uint64_t>(what);
    if (len > kMaxString) fail(std::string(what) + " length " + std::to_string(len) + " exceeds 1 GiB");
    if (len > left()) fail(std::string(what) + " length " + std::to_string(len) + " runs past the end of the file");
    std::string s(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
    pos_ += size_t(len);
    return s;
  }

 private:
  const std::byte* p_;
  size_t n_;
  size_t pos_ = 0;
  const std::string& file_;
};

size_t min_encoded_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: case GgufType::STRING: return 8;
    case GgufType::ARRAY: return 12;
  }
  return 1;
}

bool valid_value_type(uint32_t t) { return t <= uint32_t(GgufType::FLOAT64); }

nlohmann::json read_value(Cursor& c, GgufType t, GgufType* elem_out, int depth, const std::string& key) {
  switch (t) {
    case GgufType::UINT8: return c.get<uint8_t>("a u8 value");
    case GgufType::INT8: return c.get<int8_t>("an i8 value");
    case GgufType::UINT16: return c.get<uint16_t>("a u16 value");
    case GgufType::INT16: return c.get<int16_t>("an i16 value");
    case GgufType::UINT32: return c.get<uint32_t>("a u32 value");
    case GgufType::INT32: return c.get<int32_t>("an i32 value");
    case GgufType::FLOAT32: return c.get<float>("an f32 value");
    case GgufType::UINT64: return c.get<uint64_t>("a u64 value");
    case GgufType::INT64: return c.get<int64_t>("an i64 value");
    case GgufType::FLOAT64: return c.get<double>("an f64 value");
    case GgufType::BOOL: return c.get<uint8_t>("a bool value") != 0;
    case GgufType::STRING: return c.string("a string value");  // bytes kept as they are
    case GgufType::ARRAY: {
      if (depth >= kMaxArrayDepth) c.fail("key '" + key + "': arrays nested deeper than 4 levels");
      uint32_t et = c.get<uint32_t>("an array element type");
      if (!valid_value_type(et)) c.fail("key '" + key + "': unknown array element type " + std::to_string(et));
      uint64_t count = c.get<uint64_t>("an array length");
      if (count > kMaxArray) c.fail("key '" + key + "': array of " + std::to_string(count) + " elements exceeds 2^30");
      if (count > c.left() / min_encoded_size(GgufType(et)))
        c.fail("key '" + key + "': array of " + std::to_string(count) + " elements cannot fit in the " +
               std::to_string(c.left()) + " bytes left");
      if (elem_out) *elem_out = GgufType(et);
      nlohmann::json arr = nlohmann::json::array();
      arr.get_ref<nlohmann::json::array_t&>().reserve(size_t(count));
      for (uint64_t i = 0; i < count; ++i) arr.push_back(read_value(c, GgufType(et), nullptr, depth + 1, key));
      return arr;
    }
  }
  c.fail("key '" + key + "': unknown value type " + std::to_string(uint32_t(t)));
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t& out) { return __builtin_mul_overflow(a, b, &out); }

}  // namespace

bool ggml_block_geometry(uint32_t type, int64_t& bw, int64_t& bb) {
  switch (type) {
    case 0: bw = 1; bb = 4; return true;     // F32
    case 1: bw = 1; bb = 2; return true;     // F16
    case 8: bw = 32; bb = 34; return true;   // Q8_0
    case 24: bw = 1; bb = 1; return true;    // I8
    case 25: bw = 1; bb = 2; return true;    // I16
    case 26: bw = 1; bb = 4; return true;    // I32
    case 27: bw = 1; bb = 8; return true;    // I64
    case 28: bw = 1; bb = 8; return true;    // F64
    case 30: bw = 1; bb = 2; return true;    // BF16
    case 39: bw = 32; bb = 17; return true;  // MXFP4
    case 40: bw = 64; bb = 36; return true;  // NVFP4
    default: return false;
  }
}

std::string ggml_type_name(uint32_t type) {
  switch (type) {
    case 0: return "F32";
    case 1: return "F16";
    case 8: return "Q8_0";
    case 24: return "I8";
    case 25: return "I16";
    case 26: return "I32";
    case 27: return "I64";
    case 28: return "F64";
    case 30: return "BF16";
    case 39: return "MXFP4";
    case 40: return "NVFP4";
    default: return "type " + std::to_string(type);
  }
}

const GgufTensor* GgufFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const GgufValue* GgufFile::find_kv(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open GGUF file: " + std::strerror(errno));
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  size_t size = size_t(st.st_size);
  void* p = size ? mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  ::close(fd);
  if (size && p == MAP_FAILED) throw Error(path + ": mmap failed: " + std::strerror(errno));
  std::shared_ptr<void> mapping(p, [size](void* q) {
    if (q) munmap(q, size);
  });
  auto f = parse(static_cast<const std::byte*>(p), size, path);
  f->mapping_ = std::move(mapping);
  return f;
}

std::unique_ptr<GgufFile> GgufFile::parse(const std::byte* bytes, size_t size, const std::string& name) {
  auto f = std::unique_ptr<GgufFile>(new GgufFile());
  f->path_ = name;
  Cursor c(bytes, size, f->path_);
  uint32_t magic = c.get<uint32_t>("the magic");
  if (magic != 0x46554747u) c.fail("not a GGUF file (bad magic)");
  uint32_t version = c.get<uint32_t>("the version");
  if ((version & 0xFFFFu) == 0 && version != 0) c.fail("big-endian GGUF files are not supported");
  if (version != 3) c.fail("unsupported GGUF version " + std::to_string(version) + " (only 3)");
  uint64_t n_tensors = c.get<uint64_t>("the tensor count");
  uint64_t n_kv = c.get<uint64_t>("the metadata count");
  // Each KV needs >= 8 (key len) + 4 (type) + 1 bytes; each tensor record >= 8 + 4 + 8 + 4 + 8.
  if (n_kv > c.left() / 13) c.fail("metadata count " + std::to_string(n_kv) + " cannot fit in the file");
  if (n_tensors > c.left() / 32) c.fail("tensor count " + std::to_string(n_tensors) + " cannot fit in the file");

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.string("a metadata key");
    if (key.empty()) c.fail("metadata key " + std::to_string(i) + " is empty");
    if (f->kv_.count(key)) c.fail("duplicate metadata key '" + key + "'");
    uint32_t t = c.get<uint32_t>("a metadata value type");
    if (!valid_value_type(t)) c.fail("key '" + key + "': unknown value type " + std::to_string(t));
    GgufValue v;
    v.type = GgufType(t);
    v.value = read_value(c, v.type, &v.elem_type, 0, key);
    f->kv_.emplace(std::move(key), std::move(v));
  }
  if (auto* a = f->find_kv("general.alignment")) {
    if (a->type != GgufType::UINT32) c.fail("general.alignment must be a u32");
    uint32_t al = a->value.get<uint32_t>();
    if (al == 0 || (al & (al - 1)) != 0) c.fail("general.alignment " + std::to_string(al) + " is not a power of two");
    f->alignment_ = al;
  }

  f->tensors_.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensor t;
    t.name = c.string("a tensor name");
    if (t.name.empty() || t.name.size() > kMaxTensorName) c.fail("tensor " + std::to_string(i) + " has a bad name length");
    if (f->index_.count(t.name)) c.fail("duplicate tensor '" + t.name + "'");
    uint32_t n_dims = c.get<uint32_t>("a tensor's dimension count");
    if (n_dims == 0 || n_dims > 4) c.fail("tensor '" + t.name + "' has " + std::to_string(n_dims) + " dimensions (1..4 allowed)");
    uint64_t elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = c.get<uint64_t>("a tensor dimension");
      if (ne > (1ull << 40)) c.fail("tensor '" + t.name + "' dimension " + std::to_string(d) + " = " + std::to_string(ne) + " is absurd");
      if (mul_overflows(elems, ne, elems)) c.fail("tensor '" + t.name + "' element count overflows");
      t.ne.push_back(int64_t(ne));
    }
    t.type = c.get<uint32_t>("a tensor type");
    int64_t bw = 0, bb = 0;
    if (!ggml_block_geometry(t.type, bw, bb)) c.fail("tensor '" + t.name + "' has unknown or unsupported ggml type " + std::to_string(t.type));
    if (t.ne[0] % bw != 0)
      c.fail("tensor '" + t.name + "' (" + ggml_type_name(t.type) + ") has ne[0] = " + std::to_string(t.ne[0]) +
             ", not a multiple of the block size " + std::to_string(bw));
    if (mul_overflows(elems / uint64_t(bw), uint64_t(bb), t.nbytes)) c.fail("tensor '" + t.name + "' byte size overflows");
    t.offset = c.get<uint64_t>("a tensor offset");
    f->index_.emplace(t.name, f->tensors_.size());
    f->tensors_.push_back(std::move(t));
  }

  uint64_t data_off = (uint64_t(c.pos()) + f->alignment_ - 1) / f->alignment_ * f->alignment_;
  if (n_tensors > 0 && data_off > size) c.fail("the data section starts past the end of the file");
  uint64_t data_size = n_tensors > 0 ? size - data_off : 0;
  // Bounds, alignment and overlap of every tensor's bytes.
  std::vector<std::pair<uint64_t, size_t>> by_offset;
  for (size_t i = 0; i < f->tensors_.size(); ++i) {
    auto& t = f->tensors_[i];
    if (t.offset % f->alignment_ != 0)
      throw Error(f->path_ + ": tensor '" + t.name + "' offset " + std::to_string(t.offset) + " is not aligned to " +
                  std::to_string(f->alignment_));
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      throw Error(f->path_ + ": tensor '" + t.name + "' (" + std::to_string(t.nbytes) + " bytes at data offset " +
                  std::to_string(t.offset) + ") runs past the end of the file (truncated?)");
    t.data = bytes + data_off + t.offset;
    by_offset.emplace_back(t.offset, i);
  }
  std::sort(by_offset.begin(), by_offset.end());
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const auto& prev = f->tensors_[by_offset[k - 1].second];
    const auto& cur = f->tensors_[by_offset[k].second];
    if (prev.nbytes > 0 && cur.offset < prev.offset + prev.nbytes)
      throw Error(f->path_ + ": tensors '" + prev.name + "' and '" + cur.name + "' overlap");
  }
  return f;
}

}  // namespace striker
