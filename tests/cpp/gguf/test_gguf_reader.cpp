// Hostile and well-formed GGUF images: every malformed case must fail with a clear error.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "loaders/gguf_reader.h"
#include "loaders/gguf_writer.h"

using namespace striker;

namespace {

// Builds GGUF images byte by byte so each test can break exactly one thing.
struct Image {
  std::vector<std::byte> b;
  template <typename T>
  Image& put(T v) {
    auto* p = reinterpret_cast<const std::byte*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
  Image& str(const std::string& s) {
    put<uint64_t>(s.size());
    auto* p = reinterpret_cast<const std::byte*>(s.data());
    b.insert(b.end(), p, p + s.size());
    return *this;
  }
  Image& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return put<uint32_t>(0x46554747u).put<uint32_t>(version).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  }
  Image& tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
    str(name).put<uint32_t>(uint32_t(ne.size()));
    for (auto n : ne) put<uint64_t>(n);
    return put<uint32_t>(type).put<uint64_t>(offset);
  }
  Image& pad(size_t align = 32) {
    while (b.size() % align) b.push_back(std::byte{0});
    return *this;
  }
  Image& zeros(size_t n) {
    b.insert(b.end(), n, std::byte{0});
    return *this;
  }
};

std::string error_of(const Image& img) {
  try {
    GgufFile::parse(img.b.data(), img.b.size(), "x.gguf");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Image one_f32_tensor(uint64_t offset = 0, uint64_t data_bytes = 16) {
  Image i;
  i.header(1, 0).tensor("t.weight", {4}, 0, offset).pad().zeros(data_bytes);
  return i;
}

}  // namespace

TEST(GgufReader, AcceptsAWellFormedImage) {
  auto img = one_f32_tensor();
  auto f = GgufFile::parse(img.b.data(), img.b.size(), "x.gguf");
  ASSERT_EQ(f->tensors().size(), 1u);
  EXPECT_EQ(f->tensors()[0].nbytes, 16u);
}

TEST(GgufReader, RejectsMalformedImages) {
  struct Case {
    const char* what;
    Image img;
    const char* expect;
  };
  std::vector<Case> cases;
  { Image i; i.put<uint32_t>(0x12345678).put<uint32_t>(3); cases.push_back({"bad magic", i, "bad magic"}); }
  { Image i; i.header(0, 0, 2); cases.push_back({"version 2", i, "unsupported GGUF version 2"}); }
  { Image i; i.header(0, 0, 0x03000000); cases.push_back({"big endian", i, "big-endian"}); }
  { Image i; i.put<uint32_t>(0x46554747u).put<uint32_t>(3).put<uint32_t>(1); cases.push_back({"truncated header", i, "file ends inside"}); }
  { Image i; i.header(0, 1ull << 62); cases.push_back({"huge n_kv", i, "metadata count"}); }
  { Image i; i.header(0xffffffffffffffffull, 0); cases.push_back({"n_tensors 2^64-1", i, "tensor count"}); }
  { Image i; i.header(0, 1).put<uint64_t>(1ull << 63).zeros(16); cases.push_back({"key length 2^63", i, "exceeds 1 GiB"}); }
  { Image i; i.header(0, 1).put<uint64_t>(100).zeros(20); cases.push_back({"key past end", i, "runs past the end"}); }
  { Image i; i.header(0, 1).str("").put<uint32_t>(4).put<uint32_t>(1); cases.push_back({"empty key", i, "is empty"}); }
  { Image i; i.header(0, 1).str("k").put<uint32_t>(13).zeros(8); cases.push_back({"unknown value type", i, "unknown value type 13"}); }
  { Image i; i.header(0, 2).str("k").put<uint32_t>(4).put<uint32_t>(1).str("k").put<uint32_t>(4).put<uint32_t>(1); cases.push_back({"duplicate key", i, "duplicate metadata key 'k'"}); }
  { Image i; i.header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(1ull << 40); cases.push_back({"array count huge", i, "exceeds 2^30"}); }
  { Image i; i.header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(1000).zeros(10); cases.push_back({"array past end", i, "cannot fit"}); }
  { Image i; i.header(0, 1).str("k").put<uint32_t>(9).put<uint32_t>(77).put<uint64_t>(0); cases.push_back({"bad array elem type", i, "unknown array element type 77"}); }
  {
    Image i; i.header(0, 1).str("k");
    for (int d = 0; d < 6; ++d) i.put<uint32_t>(9).put<uint32_t>(9).put<uint64_t>(1);
    i.zeros(64);
    Image j; j.header(0, 1).str("k").put<uint32_t>(9);
    for (int d = 0; d < 6; ++d) j.put<uint32_t>(9).put<uint64_t>(1);
    j.zeros(64);
    cases.push_back({"deep nesting", j, "nested deeper"});
  }
  { Image i; i.header(0, 1).str("general.alignment").put<uint32_t>(4).put<uint32_t>(48); cases.push_back({"alignment 48", i, "not a power of two"}); }
  { Image i; i.header(0, 1).str("general.alignment").put<uint32_t>(5).put<int32_t>(32); cases.push_back({"alignment i32", i, "must be a u32"}); }
  { Image i; i.header(1, 0).tensor("t", {1, 1, 1, 1, 1}, 0, 0).pad().zeros(64); cases.push_back({"5 dims", i, "5 dimensions"}); }
  { Image i; i.header(1, 0).tensor("t", {1ull << 39, 1ull << 39, 1ull << 39}, 0, 0).pad().zeros(64); cases.push_back({"dims overflow", i, "overflows"}); }
  { Image i; i.header(1, 0).tensor("t", {1ull << 62}, 0, 0).pad().zeros(64); cases.push_back({"absurd dim", i, "absurd"}); }
  { Image i; i.header(1, 0).tensor("t", {4}, 99, 0).pad().zeros(64); cases.push_back({"unknown type", i, "unknown or unsupported ggml type 99"}); }
  { Image i; i.header(1, 0).tensor("t", {100}, 40, 0).pad().zeros(64); cases.push_back({"nvfp4 ne0 % 64", i, "not a multiple of the block size 64"}); }
  cases.push_back({"misaligned offset", one_f32_tensor(8, 64), "not aligned"});
  cases.push_back({"offset past end", one_f32_tensor(1ull << 40, 16), "runs past the end"});
  cases.push_back({"truncated data", one_f32_tensor(0, 8), "truncated"});
  { Image i; i.header(2, 0).tensor("a", {16}, 0, 0).tensor("b", {16}, 0, 32).pad().zeros(128); cases.push_back({"overlap", i, "overlap"}); }
  { Image i; i.header(2, 0).tensor("a", {4}, 0, 0).tensor("a", {4}, 0, 32).pad().zeros(64); cases.push_back({"duplicate tensor", i, "duplicate tensor 'a'"}); }
  for (const auto& c : cases) {
    std::string err = error_of(c.img);
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.what << ": got '" << err << "'";
    EXPECT_NE(err.find("x.gguf"), std::string::npos) << c.what << " does not name the file";
  }
}

TEST(GgufReader, WriterRoundTrips) {
  auto path = std::filesystem::temp_directory_path() / "striker_gguf_roundtrip.gguf";
  GgufWriter w;
  w.add_string("general.architecture", "flint");
  w.add_u32("flint.block_count", 7);
  w.add_f32("flint.rope.freq_base", 10000.0f);
  w.add("flint.pattern", GgufType::ARRAY, nlohmann::json::array({true, false, true}), GgufType::BOOL);
  w.add_tensor("a.weight", 0, {3, 2}, [](std::byte* d, size_t n) {
    for (size_t i = 0; i < n / 4; ++i) {
      float f = float(i);
      std::memcpy(d + 4 * i, &f, 4);
    }
  });
  w.add_tensor("b.weight", 40, {64, 2}, [](std::byte* d, size_t n) { std::memset(d, 0x11, n); });
  w.write(path.string());
  auto f = GgufFile::open(path.string());
  EXPECT_EQ(f->find_kv("general.architecture")->value, "flint");
  EXPECT_EQ(f->find_kv("flint.block_count")->type, GgufType::UINT32);
  EXPECT_EQ(f->find_kv("flint.pattern")->value, nlohmann::json::array({true, false, true}));
  const GgufTensor* a = f->find("a.weight");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->torch_shape(), (std::vector<int64_t>{2, 3}));
  float v5;
  std::memcpy(&v5, a->data + 20, 4);
  EXPECT_EQ(v5, 5.0f);
  const GgufTensor* b = f->find("b.weight");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->nbytes, 72u);
  EXPECT_EQ(uint8_t(b->data[71]), 0x11);
  std::filesystem::remove(path);
}
