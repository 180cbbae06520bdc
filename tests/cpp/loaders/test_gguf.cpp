// The GGUF v3 reader: a fixture written by the gguf PyPI package, and hostile images built here.
#include <gtest/gtest.h>

#include <cstring>

#include "loader_test_util.h"
#include "loaders/gguf.h"

using namespace striker;
using namespace striker::test;

namespace {

#define EXPECT_ERROR_HAS(expr, needle)                   \
  do {                                                   \
    std::string e_ = (expr);                             \
    EXPECT_NE(e_.find(needle), std::string::npos) << e_; \
  } while (0)

const fs::path kSmall = fs::path(STRIKER_SOURCE_DIR) / "tests/cpp/loaders/data/small.gguf";

// Builds GGUF images field by field (little-endian), so tests can write any lie they need.
class GgufBuilder {
 public:
  GgufBuilder& raw(const void* p, size_t n) {
    bytes.append(static_cast<const char*>(p), n);
    return *this;
  }
  template <class T>
  GgufBuilder& put(T v) {
    return raw(&v, sizeof v);
  }
  GgufBuilder& str(const std::string& s) {
    put<uint64_t>(s.size());
    return raw(s.data(), s.size());
  }
  GgufBuilder& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    raw("GGUF", 4);
    put<uint32_t>(version);
    put<uint64_t>(n_tensors);
    return put<uint64_t>(n_kv);
  }
  GgufBuilder& kv_u32(const std::string& key, uint32_t v) {
    str(key);
    put<uint32_t>(4);
    return put<uint32_t>(v);
  }
  GgufBuilder& tensor(const std::string& name, std::vector<int64_t> ne, uint32_t type, uint64_t offset) {
    str(name);
    put<uint32_t>(uint32_t(ne.size()));
    for (auto n : ne) put<int64_t>(n);
    put<uint32_t>(type);
    return put<uint64_t>(offset);
  }
  GgufBuilder& pad(size_t alignment = 32) {
    bytes.append((alignment - bytes.size() % alignment) % alignment, '\0');
    return *this;
  }
  GgufBuilder& zeros(size_t n) {
    bytes.append(n, '\0');
    return *this;
  }
  std::string bytes;
};

std::string gguf_error(const std::string& image) {
  std::string e = error_of([&] { GgufFile::parse({reinterpret_cast<const std::byte*>(image.data()), image.size()}, "t.gguf"); });
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  if (!e.empty()) EXPECT_EQ(e.rfind("t.gguf: ", 0), 0u) << e;
  return e;
}

}  // namespace

TEST(Gguf, ReadsFileWrittenByTheGgufPackage) {
  GgufFile g = GgufFile::open(kSmall);
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.alignment, 32u);
  EXPECT_EQ(g.data_offset, 608u);  // as gguf.GGUFReader reports
  EXPECT_EQ(g.get_string("general.architecture"), "flint");
  EXPECT_EQ(g.get_string("general.name"), "small");
  EXPECT_EQ(g.get_int("flint.block_count"), 7);
  EXPECT_EQ(g.get_int("test.i32"), -5);
  EXPECT_EQ(g.get_int("test.u64"), int64_t(1) << 40);
  EXPECT_NEAR(*g.get_float("flint.attention.layer_norm_rms_epsilon"), 1e-6, 1e-12);
  EXPECT_EQ(g.get_float("test.f64"), 2.5);
  EXPECT_EQ(g.get_float("flint.block_count"), 7.0);
  EXPECT_EQ(g.get_bool("test.bool"), true);
  EXPECT_EQ(g.get_string_array("test.strings"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(g.get_int_array("test.ints"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(g.get_float_array("test.floats"), (std::vector<double>{0.5, 1.5}));
  EXPECT_FALSE(g.get_int("no.such.key").has_value());

  ASSERT_EQ(g.tensors.size(), 3u);
  const auto* f32 = g.find_tensor("f32");
  ASSERT_NE(f32, nullptr);
  EXPECT_EQ(f32->torch_shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f32->nbytes, 24u);
  float v[6];
  std::memcpy(v, g.tensor_data(*f32), 24);
  EXPECT_EQ(v[5], 5.0f);
  const auto* nv = g.find_tensor("blk.0.ffn_down_exps.weight");
  ASSERT_NE(nv, nullptr);
  EXPECT_EQ(nv->type, kGgmlTypeNvfp4);
  EXPECT_EQ(nv->torch_shape(), (std::vector<int64_t>{2, 64}));
  EXPECT_EQ(nv->nbytes, 72u);
  EXPECT_EQ(std::to_integer<int>(g.tensor_data(*nv)[71]), 71);
  EXPECT_EQ(ggml_type_to_dtype(nv->type), DType::NVFP4);
  EXPECT_EQ(g.find_tensor("bf16")->nbytes, 512u);
}

TEST(Gguf, TypedAccessNamesTheKey) {
  GgufFile g = GgufFile::open(kSmall);
  EXPECT_ERROR_HAS(error_of([&] { g.get_string("flint.block_count"); }), "'flint.block_count' must be a string, got UINT32");
  EXPECT_ERROR_HAS(error_of([&] { g.get_int("general.name"); }), "must be an integer, got STRING");
  EXPECT_ERROR_HAS(error_of([&] { g.get_int_array("test.strings"); }), "'test.strings' must be an array of integers");
  EXPECT_ERROR_HAS(error_of([&] { g.get_int("test.ints"); }), "is an array");
  EXPECT_ERROR_HAS(error_of([&] { g.get_string_array("general.name"); }), "is not an array");
}

TEST(Gguf, EveryTruncationAndByteFlipIsAnErrorOrAValidParse) {
  const std::string image = read_bytes(kSmall);
  // The writer pads the last tensor; cutting only that padding leaves a valid file.
  const size_t data_end = 1152 + 72;  // offset and size of the last tensor, per gguf.GGUFReader
  ASSERT_EQ(image.size(), 1248u);
  for (size_t n = 0; n < image.size(); ++n) EXPECT_EQ(gguf_error(image.substr(0, n)).empty(), n >= data_end) << n;
  size_t parsed = 0;
  for (size_t i = 0; i < image.size(); ++i) {
    for (unsigned char b : {0x00, 0x01, 0x7f, 0x80, 0xff}) {
      std::string m = image;
      m[i] = char(b);
      parsed += gguf_error(m).empty();
    }
  }
  EXPECT_GT(parsed, 0u);  // flips inside tensor data are harmless
}

TEST(Gguf, RejectsBadHeaders) {
  EXPECT_ERROR_HAS(gguf_error("GGUF"), "too short");
  EXPECT_ERROR_HAS(gguf_error(GgufBuilder().header(0, 0).bytes.replace(0, 4, "GGML")), "not a GGUF file");
  EXPECT_ERROR_HAS(gguf_error(GgufBuilder().header(0, 0, 2).bytes), "version 2 is not supported");
  EXPECT_ERROR_HAS(gguf_error(GgufBuilder().header(0, 0, 0x03000000).bytes), "big-endian");
  EXPECT_ERROR_HAS(gguf_error(GgufBuilder().header(0, uint64_t(1) << 62).bytes), "metadata count");
  EXPECT_ERROR_HAS(gguf_error(GgufBuilder().header(~uint64_t(0), 0).bytes), "tensor count");
  EXPECT_TRUE(gguf_error(GgufBuilder().header(0, 0).bytes).empty());
}

TEST(Gguf, RejectsBadMetadata) {
  auto one_kv = [] { return GgufBuilder().header(0, 1); };
  auto padded = [](GgufBuilder b) { return b.zeros(32).bytes; };  // room for the smallest record
  EXPECT_ERROR_HAS(gguf_error(padded(one_kv().put<uint64_t>(~uint64_t(0)))), "truncated: key of metadata entry 0");
  EXPECT_ERROR_HAS(gguf_error(one_kv().put<uint64_t>(70000).zeros(70100).bytes), "is 70000 bytes, over the 65535-byte limit");
  EXPECT_ERROR_HAS(gguf_error(padded(one_kv().put<uint64_t>(1000).raw("ab", 2))), "truncated: key of metadata entry 0");
  EXPECT_ERROR_HAS(gguf_error(one_kv().str("").put<uint32_t>(4).put<uint32_t>(1).bytes), "empty key");
  EXPECT_ERROR_HAS(gguf_error(padded(one_kv().str("k").put<uint32_t>(13))), "13 is not a GGUF value type");
  EXPECT_ERROR_HAS(gguf_error(one_kv().str("k").put<uint32_t>(7).put<uint8_t>(2).bytes), "bool stored as 2");
  EXPECT_ERROR_HAS(gguf_error(one_kv().str("k").put<uint32_t>(8).put<uint64_t>(uint64_t(1) << 60).bytes), "'k'");
  EXPECT_ERROR_HAS(gguf_error(one_kv().str("k").put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(1).bytes), "array of arrays");
  EXPECT_ERROR_HAS(gguf_error(one_kv().str("k").put<uint32_t>(9).put<uint32_t>(10).put<uint64_t>(uint64_t(1) << 61).bytes),
                   "claims 2305843009213693952 elements");
  EXPECT_ERROR_HAS(gguf_error(one_kv().str("k").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(~uint64_t(0)).bytes),
                   "strings, more than the file holds");
  // A string array whose element lengths lie.
  EXPECT_ERROR_HAS(gguf_error(padded(one_kv().str("k").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(2).str("a").put<uint64_t>(99))),
                   "truncated");
  EXPECT_ERROR_HAS(gguf_error(GgufBuilder().header(0, 2).kv_u32("k", 1).kv_u32("k", 2).bytes), "duplicate metadata key 'k'");
  auto align = [](uint32_t type, uint32_t v) {
    GgufBuilder b = GgufBuilder().header(0, 1).str("general.alignment").put<uint32_t>(type);
    return type == 4 ? b.put<uint32_t>(v).bytes : b.put<uint64_t>(v).bytes;
  };
  EXPECT_ERROR_HAS(gguf_error(align(10, 32)), "'general.alignment' must be UINT32, got UINT64");
  EXPECT_ERROR_HAS(gguf_error(align(4, 0)), "power of two");
  EXPECT_ERROR_HAS(gguf_error(align(4, 48)), "power of two");
  EXPECT_ERROR_HAS(gguf_error(align(4, 1u << 30)), "power of two");
  EXPECT_TRUE(gguf_error(align(4, 64)).empty());
}

TEST(Gguf, RejectsBadTensorInfos) {
  auto one = [](std::vector<int64_t> ne, uint32_t type, uint64_t offset, size_t data) {
    return GgufBuilder().header(1, 0).tensor("t", ne, type, offset).pad().zeros(data).bytes;
  };
  EXPECT_TRUE(gguf_error(one({3, 2}, 0, 0, 24)).empty());
  EXPECT_ERROR_HAS(gguf_error(one({1, 1, 1, 1, 1}, 0, 0, 4)), "5 dimensions");
  EXPECT_ERROR_HAS(gguf_error(one({-1}, 0, 0, 4)), "negative ne[0]");
  EXPECT_ERROR_HAS(gguf_error(one({4}, 4, 0, 32)), "unknown ggml type id 4");
  EXPECT_ERROR_HAS(gguf_error(one({4}, 99, 0, 32)), "unknown ggml type id 99");
  EXPECT_ERROR_HAS(gguf_error(one({32, 2}, kGgmlTypeNvfp4, 0, 72)), "ne[0] = 32 is not a multiple of the NVFP4 block size 64");
  EXPECT_ERROR_HAS(gguf_error(one({int64_t(1) << 40, int64_t(1) << 40}, 0, 0, 4)), "size overflows");
  EXPECT_ERROR_HAS(gguf_error(one({int64_t(1) << 62, 4}, 1, 0, 4)), "size overflows");
  EXPECT_ERROR_HAS(gguf_error(one({1}, 0, 4, 64)), "offset 4 is not a multiple of the alignment 32");
  EXPECT_ERROR_HAS(gguf_error(one({3, 2}, 0, 0, 20)), "runs past the end of the file");
  EXPECT_ERROR_HAS(gguf_error(one({3, 2}, 0, uint64_t(-32), 24)), "runs past the end of the file");
  EXPECT_ERROR_HAS(gguf_error(GgufBuilder().header(1, 0).tensor(std::string(64, 'n'), {1}, 0, 0).pad().zeros(4).bytes),
                   "over the 63-byte limit");
  EXPECT_ERROR_HAS(gguf_error(GgufBuilder().header(1, 0).tensor("", {1}, 0, 0).pad().zeros(4).bytes), "empty name");
  auto two = [](const std::string& second, uint64_t offset) {
    return GgufBuilder().header(2, 0).tensor("a", {16}, 0, 0).tensor(second, {16}, 0, offset).pad().zeros(128).bytes;
  };
  EXPECT_TRUE(gguf_error(two("b", 64)).empty());
  EXPECT_ERROR_HAS(gguf_error(two("b", 32)), "tensor 'b' overlaps tensor 'a'");
  EXPECT_ERROR_HAS(gguf_error(two("a", 64)), "duplicate tensor name 'a'");
  // Data section start past the end of the file.
  EXPECT_ERROR_HAS(gguf_error(GgufBuilder().header(1, 0).tensor("z", {0}, 0, 0).bytes), "past the end");
}
