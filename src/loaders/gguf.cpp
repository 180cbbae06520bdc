#include "loaders/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "core/error.h"
#include "loaders/strict_json.h"

namespace striker {

static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace {

constexpr uint64_t kMaxKeyBytes = 65535;          // docs/gguf.md
constexpr uint64_t kMaxTensorNameBytes = 63;      // GGML_MAX_NAME - 1
constexpr uint64_t kMaxAlignment = 1u << 20;
constexpr uint32_t kMaxDims = 4;

// ggml_type ids 0..42 (reference/formats.md §2); removed ids have block_elements 0.
constexpr GgmlTypeInfo kGgmlTypes[] = {
    {"F32", 1, 4},        {"F16", 1, 2},        {"Q4_0", 32, 18},     {"Q4_1", 32, 20},
    {"", 0, 0},           {"", 0, 0},           {"Q5_0", 32, 22},     {"Q5_1", 32, 24},
    {"Q8_0", 32, 34},     {"Q8_1", 32, 36},     {"Q2_K", 256, 84},    {"Q3_K", 256, 110},
    {"Q4_K", 256, 144},   {"Q5_K", 256, 176},   {"Q6_K", 256, 210},   {"Q8_K", 256, 292},
    {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74},  {"IQ3_XXS", 256, 98}, {"IQ1_S", 256, 50},
    {"IQ4_NL", 32, 18},   {"IQ3_S", 256, 110},  {"IQ2_S", 256, 82},   {"IQ4_XS", 256, 136},
    {"I8", 1, 1},         {"I16", 1, 2},        {"I32", 1, 4},        {"I64", 1, 8},
    {"F64", 1, 8},        {"IQ1_M", 256, 56},   {"BF16", 1, 2},       {"", 0, 0},
    {"", 0, 0},           {"", 0, 0},           {"TQ1_0", 256, 54},   {"TQ2_0", 256, 66},
    {"", 0, 0},           {"", 0, 0},           {"", 0, 0},           {"MXFP4", 32, 17},
    {"NVFP4", 64, 36},    {"Q1_0", 128, 18},    {"Q2_0", 64, 18},
};

uint64_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::BOOL: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: return 8;
    case GgufValueType::STRING: case GgufValueType::ARRAY: return 0;
  }
  return 0;
}

// Bounds-checked little-endian reading of a file image; every failure names what was read.
class Cursor {
 public:
  Cursor(std::span<const std::byte> file, const std::string& source) : file_(file), source_(source) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return file_.size() - pos_; }
  void seek(uint64_t p) { pos_ = p; }

  [[noreturn]] void fail(const std::string& what) const { throw Error(source_ + ": " + what); }

  void need(uint64_t n, const std::string& what) const {
    if (n > left())
      fail("truncated: " + what + " at byte " + std::to_string(pos_) + " needs " + std::to_string(n) + " bytes, " +
           std::to_string(left()) + " left");
  }
  template <class T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, file_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string_view read_string(const std::string& what, uint64_t max_bytes) {
    const uint64_t n = read<uint64_t>(what + " length");
    if (n > max_bytes && max_bytes < left())
      fail(what + " is " + std::to_string(n) + " bytes, over the " + std::to_string(max_bytes) + "-byte limit");
    need(n, what);
    std::string_view s(reinterpret_cast<const char*>(file_.data() + pos_), size_t(n));
    pos_ += n;
    return s;
  }
  void skip(uint64_t n, const std::string& what) {
    need(n, what);
    pos_ += n;
  }

 private:
  std::span<const std::byte> file_;
  const std::string& source_;
  uint64_t pos_ = 0;
};

GgufValueType read_value_type(Cursor& c, const std::string& what) {
  const uint32_t t = c.read<uint32_t>(what);
  if (t > uint32_t(GgufValueType::F64)) c.fail(what + " " + std::to_string(t) + " is not a GGUF value type");
  return GgufValueType(t);
}

GgufKV read_kv(Cursor& c, size_t index) {
  GgufKV kv;
  kv.key = std::string(c.read_string("key of metadata entry " + std::to_string(index), kMaxKeyBytes));
  if (kv.key.empty()) c.fail("metadata entry " + std::to_string(index) + " has an empty key");
  const std::string what = "value of " + quote(kv.key);
  kv.type = read_value_type(c, "type of " + quote(kv.key));
  switch (kv.type) {
    case GgufValueType::U8: kv.scalar = uint64_t(c.read<uint8_t>(what)); break;
    case GgufValueType::U16: kv.scalar = uint64_t(c.read<uint16_t>(what)); break;
    case GgufValueType::U32: kv.scalar = uint64_t(c.read<uint32_t>(what)); break;
    case GgufValueType::U64: kv.scalar = c.read<uint64_t>(what); break;
    case GgufValueType::I8: kv.scalar = int64_t(c.read<int8_t>(what)); break;
    case GgufValueType::I16: kv.scalar = int64_t(c.read<int16_t>(what)); break;
    case GgufValueType::I32: kv.scalar = int64_t(c.read<int32_t>(what)); break;
    case GgufValueType::I64: kv.scalar = c.read<int64_t>(what); break;
    case GgufValueType::F32: kv.scalar = double(c.read<float>(what)); break;
    case GgufValueType::F64: kv.scalar = c.read<double>(what); break;
    case GgufValueType::BOOL: {
      const uint8_t b = c.read<uint8_t>(what);
      if (b > 1) c.fail(what + " is a bool stored as " + std::to_string(b) + " (must be 0 or 1)");
      kv.scalar = b == 1;
      break;
    }
    case GgufValueType::STRING: kv.scalar = std::string(c.read_string(what, c.left())); break;
    case GgufValueType::ARRAY: {
      kv.array_type = read_value_type(c, "element type of " + quote(kv.key));
      if (kv.array_type == GgufValueType::ARRAY) c.fail(quote(kv.key) + " is an array of arrays (not supported)");
      kv.array_count = c.read<uint64_t>("element count of " + quote(kv.key));
      kv.array_offset = c.pos();
      if (kv.array_type == GgufValueType::STRING) {
        // Each string takes at least its 8-byte length: bound the count before walking.
        if (kv.array_count > c.left() / 8)
          c.fail(quote(kv.key) + " claims " + std::to_string(kv.array_count) + " strings, more than the file holds");
        for (uint64_t i = 0; i < kv.array_count; ++i) c.read_string(what + " element " + std::to_string(i), c.left());
      } else {
        const uint64_t size = scalar_size(kv.array_type);
        if (kv.array_count > c.left() / size)
          c.fail(quote(kv.key) + " claims " + std::to_string(kv.array_count) + " elements, more than the file holds");
        c.skip(kv.array_count * size, what);
      }
      break;
    }
  }
  return kv;
}

GgufTensorInfo read_tensor_info(Cursor& c, size_t index) {
  GgufTensorInfo t;
  t.name = std::string(c.read_string("name of tensor " + std::to_string(index), kMaxTensorNameBytes));
  if (t.name.empty()) c.fail("tensor " + std::to_string(index) + " has an empty name");
  const std::string what = "tensor " + quote(t.name);
  t.n_dims = c.read<uint32_t>(what + " n_dims");
  if (t.n_dims > kMaxDims) c.fail(what + " has " + std::to_string(t.n_dims) + " dimensions (at most 4)");
  for (uint32_t j = 0; j < t.n_dims; ++j) {
    const int64_t ne = c.read<int64_t>(what + " ne[" + std::to_string(j) + "]");
    if (ne < 0) c.fail(what + " has negative ne[" + std::to_string(j) + "] = " + std::to_string(ne));
    t.ne[j] = ne;
  }
  t.type = c.read<uint32_t>(what + " type");
  const GgmlTypeInfo* info = ggml_type_info(t.type);
  if (info == nullptr) c.fail(what + " has unknown ggml type id " + std::to_string(t.type));
  t.offset = c.read<uint64_t>(what + " offset");
  if (t.ne[0] % info->block_elements != 0)
    c.fail(what + " ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of the " + std::string(info->name) +
           " block size " + std::to_string(info->block_elements));
  uint64_t bytes = uint64_t(t.ne[0]) / info->block_elements * info->block_bytes;
  uint64_t elements = uint64_t(t.ne[0]);
  for (int j = 1; j < 4; ++j) {
    if (__builtin_mul_overflow(bytes, uint64_t(t.ne[j]), &bytes) ||
        __builtin_mul_overflow(elements, uint64_t(t.ne[j]), &elements) || elements > uint64_t(INT64_MAX))
      c.fail(what + " size overflows");
  }
  t.nbytes = bytes;
  return t;
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType t) {
  static constexpr std::string_view names[] = {"UINT8", "INT8",   "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                                               "BOOL",  "STRING", "ARRAY",  "UINT64", "INT64", "FLOAT64"};
  return uint32_t(t) < std::size(names) ? names[uint32_t(t)] : "?";
}

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  if (id >= std::size(kGgmlTypes) || kGgmlTypes[id].block_elements == 0) return nullptr;
  return &kGgmlTypes[id];
}

std::optional<DType> ggml_type_to_dtype(uint32_t id) {
  switch (id) {
    case 0: return DType::F32;
    case 1: return DType::F16;
    case 24: return DType::I8;
    case 25: return DType::I16;
    case 26: return DType::I32;
    case 27: return DType::I64;
    case 28: return DType::F64;
    case 30: return DType::BF16;
    case kGgmlTypeNvfp4: return DType::NVFP4;
    default: return std::nullopt;
  }
}

std::vector<int64_t> GgufTensorInfo::torch_shape() const {
  std::vector<int64_t> s;
  for (uint32_t j = n_dims; j-- > 0;) s.push_back(ne[j]);
  return s;
}

GgufFile GgufFile::parse(std::span<const std::byte> file, const std::string& source) {
  GgufFile g;
  g.file_ = file;
  g.source_ = source;
  Cursor c(file, g.source_);
  if (file.size() < 24) c.fail("file is " + std::to_string(file.size()) + " bytes, too short for a GGUF header");
  if (std::memcmp(file.data(), "GGUF", 4) != 0) c.fail("not a GGUF file (magic is not 'GGUF')");
  c.seek(4);
  g.version = c.read<uint32_t>("version");
  if (g.version != 3) {
    if ((g.version & 0xffff) == 0) c.fail("big-endian GGUF files are not supported");
    c.fail("GGUF version " + std::to_string(g.version) + " is not supported (only version 3)");
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Smallest records: a KV is 8 (key length) + 1 + 4 (type) + 1 bytes; a tensor info is
  // 8 + 1 + 4 (n_dims) + 4 (type) + 8 (offset) bytes. Bound the counts before reserving.
  if (n_kv > c.left() / 14) c.fail("metadata count " + std::to_string(n_kv) + " is more than the file can hold");
  if (n_tensors > c.left() / 25) c.fail("tensor count " + std::to_string(n_tensors) + " is more than the file can hold");

  g.kvs.reserve(size_t(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    g.kvs.push_back(read_kv(c, size_t(i)));
    if (!g.kv_index_.emplace(g.kvs.back().key, g.kvs.size() - 1).second)
      c.fail("duplicate metadata key " + quote(g.kvs.back().key));
  }
  if (const GgufKV* a = g.find_kv("general.alignment")) {
    if (a->type != GgufValueType::U32)
      c.fail("'general.alignment' must be UINT32, got " + std::string(gguf_value_type_name(a->type)));
    const uint64_t v = std::get<uint64_t>(a->scalar);
    if (v == 0 || (v & (v - 1)) != 0 || v > kMaxAlignment)
      c.fail("'general.alignment' = " + std::to_string(v) + " must be a power of two up to " + std::to_string(kMaxAlignment));
    g.alignment = v;
  }

  g.tensors.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    g.tensors.push_back(read_tensor_info(c, size_t(i)));
    if (!g.tensor_index_.emplace(g.tensors.back().name, g.tensors.size() - 1).second)
      c.fail("duplicate tensor name " + quote(g.tensors.back().name));
  }

  // The data section starts at the next multiple of the alignment (no overflow: pos < size).
  g.data_offset = (c.pos() + g.alignment - 1) / g.alignment * g.alignment;
  if (n_tensors > 0 && g.data_offset > file.size())
    c.fail("data section would start at byte " + std::to_string(g.data_offset) + ", past the end of the " +
           std::to_string(file.size()) + "-byte file");
  const uint64_t data_bytes = n_tensors > 0 ? file.size() - g.data_offset : 0;

  // Each tensor aligned, inside the data section, and no two overlapping.
  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& t : g.tensors) {
    const std::string what = "tensor " + quote(t.name);
    if (t.offset % g.alignment != 0)
      c.fail(what + " offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
             std::to_string(g.alignment));
    if (t.offset > data_bytes || t.nbytes > data_bytes - t.offset)
      c.fail(what + " (" + std::to_string(t.nbytes) + " bytes at data offset " + std::to_string(t.offset) +
             ") runs past the end of the file (truncated?)");
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const auto* prev = by_offset[i - 1];
    if (prev->offset + prev->nbytes > by_offset[i]->offset)
      c.fail("tensor " + quote(by_offset[i]->name) + " overlaps tensor " + quote(prev->name));
  }
  return g;
}

GgufFile GgufFile::open(const std::filesystem::path& path) {
  auto map = std::make_shared<MappedFile>(path);
  GgufFile g = parse(map->bytes(), path.string());
  g.map_ = std::move(map);
  return g;
}

const GgufKV* GgufFile::find_kv(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs[it->second];
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors[it->second];
}

const GgufKV& GgufFile::typed_kv(std::string_view key, bool array) const {
  const GgufKV* kv = find_kv(key);
  if ((kv->type == GgufValueType::ARRAY) != array)
    throw Error(source_ + ": metadata " + quote(key) + " is " + (array ? "not an array" : "an array") +
                " (type " + std::string(gguf_value_type_name(kv->type)) + ")");
  return *kv;
}

namespace {

[[noreturn]] void wrong_type(const std::string& source, std::string_view key, const char* wanted, GgufValueType got) {
  throw Error(source + ": metadata " + quote(key) + " must be " + wanted + ", got " + std::string(gguf_value_type_name(got)));
}

// One numeric element at `p` of type `t`, as int64 (fits = false when it does not) or double.
bool element_as_int(const std::byte* p, GgufValueType t, int64_t& out) {
  auto get = [&](auto v) {
    std::memcpy(&v, p, sizeof v);
    return v;
  };
  switch (t) {
    case GgufValueType::U8: out = get(uint8_t{}); return true;
    case GgufValueType::I8: out = get(int8_t{}); return true;
    case GgufValueType::U16: out = get(uint16_t{}); return true;
    case GgufValueType::I16: out = get(int16_t{}); return true;
    case GgufValueType::U32: out = get(uint32_t{}); return true;
    case GgufValueType::I32: out = get(int32_t{}); return true;
    case GgufValueType::I64: out = get(int64_t{}); return true;
    case GgufValueType::U64: {
      uint64_t v = get(uint64_t{});
      if (v > uint64_t(INT64_MAX)) return false;
      out = int64_t(v);
      return true;
    }
    default: return false;
  }
}

bool element_as_float(const std::byte* p, GgufValueType t, double& out) {
  if (t == GgufValueType::F32) {
    float f;
    std::memcpy(&f, p, 4);
    out = f;
    return true;
  }
  if (t == GgufValueType::F64) {
    std::memcpy(&out, p, 8);
    return true;
  }
  int64_t i;
  if (!element_as_int(p, t, i)) return false;
  out = double(i);
  return true;
}

}  // namespace

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  if (!find_kv(key)) return std::nullopt;
  const GgufKV& kv = typed_kv(key, false);
  if (auto* u = std::get_if<uint64_t>(&kv.scalar)) {
    if (*u > uint64_t(INT64_MAX)) throw Error(source_ + ": metadata " + quote(key) + " is too large");
    return int64_t(*u);
  }
  if (auto* i = std::get_if<int64_t>(&kv.scalar)) return *i;
  wrong_type(source_, key, "an integer", kv.type);
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  if (!find_kv(key)) return std::nullopt;
  const GgufKV& kv = typed_kv(key, false);
  if (auto* d = std::get_if<double>(&kv.scalar)) return *d;
  if (auto* u = std::get_if<uint64_t>(&kv.scalar)) return double(*u);
  if (auto* i = std::get_if<int64_t>(&kv.scalar)) return double(*i);
  wrong_type(source_, key, "a number", kv.type);
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  if (!find_kv(key)) return std::nullopt;
  const GgufKV& kv = typed_kv(key, false);
  if (auto* b = std::get_if<bool>(&kv.scalar)) return *b;
  wrong_type(source_, key, "a bool", kv.type);
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  if (!find_kv(key)) return std::nullopt;
  const GgufKV& kv = typed_kv(key, false);
  if (auto* s = std::get_if<std::string>(&kv.scalar)) return *s;
  wrong_type(source_, key, "a string", kv.type);
}

std::optional<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  if (!find_kv(key)) return std::nullopt;
  const GgufKV& kv = typed_kv(key, true);
  const uint64_t size = scalar_size(kv.array_type);
  std::vector<int64_t> out(size_t(kv.array_count));
  for (uint64_t i = 0; i < kv.array_count; ++i)
    if (size == 0 || !element_as_int(file_.data() + kv.array_offset + i * size, kv.array_type, out[size_t(i)]))
      wrong_type(source_, key, "an array of integers", kv.array_type);
  return out;
}

std::optional<std::vector<double>> GgufFile::get_float_array(std::string_view key) const {
  if (!find_kv(key)) return std::nullopt;
  const GgufKV& kv = typed_kv(key, true);
  const uint64_t size = scalar_size(kv.array_type);
  std::vector<double> out(size_t(kv.array_count));
  for (uint64_t i = 0; i < kv.array_count; ++i)
    if (size == 0 || !element_as_float(file_.data() + kv.array_offset + i * size, kv.array_type, out[size_t(i)]))
      wrong_type(source_, key, "an array of numbers", kv.array_type);
  return out;
}

std::optional<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  if (!find_kv(key)) return std::nullopt;
  const GgufKV& kv = typed_kv(key, true);
  if (kv.array_type != GgufValueType::STRING) wrong_type(source_, key, "an array of strings", kv.array_type);
  Cursor c(file_, source_);  // already validated by parse(); the cursor re-checks bounds anyway
  c.seek(kv.array_offset);
  std::vector<std::string> out;
  out.reserve(size_t(kv.array_count));
  for (uint64_t i = 0; i < kv.array_count; ++i) out.emplace_back(c.read_string(quote(key), c.left()));
  return out;
}

}  // namespace striker
