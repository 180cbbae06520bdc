// The safetensors header parser against hand-built valid and hostile files.
#include <gtest/gtest.h>

#include "core/mapped_file.h"
#include "loader_test_util.h"
#include "loaders/safetensors.h"
#include "loaders/strict_json.h"

using namespace striker;
using namespace striker::test;

namespace {

SafetensorsHeader parse(const std::string& image) {
  return parse_safetensors({reinterpret_cast<const std::byte*>(image.data()), image.size()}, "x.safetensors");
}

// The error for a file made of `header` and `data`; asserts it is one line naming the file.
std::string header_error(const std::string& header, const std::string& data = "") {
  std::string image = safetensors_image(header, data);
  std::string e = error_of([&] { parse(image); });
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  if (!e.empty()) EXPECT_EQ(e.rfind("x.safetensors: ", 0), 0u) << e;
  return e;
}

#define EXPECT_ERROR_HAS(expr, needle)                       \
  do {                                                       \
    std::string e_ = (expr);                                 \
    EXPECT_NE(e_.find(needle), std::string::npos) << e_;     \
  } while (0)

}  // namespace

TEST(Safetensors, ParsesValidFileWithMetadataScalarAndEmptyTensor) {
  std::string header =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[],"data_offsets":[4,8]},)"
      R"("a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"z":{"dtype":"I64","shape":[0,3],"data_offsets":[8,8]}})";
  header.append(8 - header.size() % 8, ' ');  // space padding is legal
  auto h = parse(safetensors_image(header, std::string(8, '\x01')));
  ASSERT_EQ(h.tensors.size(), 3u);
  EXPECT_EQ(h.metadata.at("format"), "pt");
  const auto* a = h.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::BF16);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(h.find("b")->shape.size(), 0u);
  EXPECT_EQ(h.find("z")->nbytes(), 0u);
  EXPECT_EQ(h.data_start, 8 + header.size());
}

TEST(Safetensors, UnsupportedButKnownDtypeIsValidatedNotRejected) {
  auto h = parse(safetensors_image(R"({"q":{"dtype":"F8_E4M3","shape":[3],"data_offsets":[0,3]}})", "abc"));
  EXPECT_FALSE(h.find("q")->dtype_supported);
  EXPECT_ERROR_HAS(header_error(R"({"q":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", "ab"), "whole bytes");
}

TEST(Safetensors, RejectsShortOrAbsurdLengths) {
  EXPECT_ERROR_HAS(error_of([] { parse("1234"); }), "too short");
  std::string huge(8, '\xff');
  EXPECT_ERROR_HAS(error_of([&] { parse(huge + "{}"); }), "exceeds");
  std::string past = safetensors_image("{}", "");
  past[0] = 100;  // claims 100 header bytes, has 2
  EXPECT_ERROR_HAS(error_of([&] { parse(past); }), "runs past the end");
}

TEST(Safetensors, RejectsNonObjectAndBrokenJson) {
  EXPECT_ERROR_HAS(header_error("[1,2]"), "must be a JSON object");
  EXPECT_ERROR_HAS(header_error("{\"a\":"), "invalid JSON");
  EXPECT_ERROR_HAS(header_error(R"({"a":5})"), "header entry must be an object");
  EXPECT_ERROR_HAS(header_error("{\"a\":\"\xff\xfe\"}"), "invalid JSON");  // not UTF-8
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"F32","shape":[[[[1]]]],"data_offsets":[0,4]}})"), "nesting");
  std::string dup = R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  EXPECT_ERROR_HAS(header_error(dup, "x"), "duplicate key 'a'");
}

TEST(Safetensors, RejectsBadDtypeAndFields) {
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"FP32","shape":[1],"data_offsets":[0,4]}})", "abcd"),
                   "tensor 'a': unknown dtype 'FP32'");
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})", "abcd"), "'dtype' must be");
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", "abcd"),
                   "unknown header field 'x'");
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", "abcd"), "'shape'");
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"F32","shape":[1]}})", "abcd"), "'data_offsets'");
  EXPECT_ERROR_HAS(header_error(R"({"a\n":{"dtype":"F32","shape":[1]}})", "abcd"), "'a\\x0a'");  // kept on one line
}

TEST(Safetensors, RejectsBadShapes) {
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"), "non-negative");
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", "abcd"), "non-negative");
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", "abcd"),
                   "overflows");
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,4]}})", "abcd"),
                   "overflows");
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]}})", "abcd"),
                   "non-negative");
}

TEST(Safetensors, RejectsBadOffsets) {
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})", "abcd"), "reversed");
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", "abcd"), "file truncated");
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd"),
                   "span 4 bytes but F32 shape needs 8");
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "abcd"), "[begin, end]");
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,-4]}})", "abcd"), "[begin, end]");
  // Overlap, hole, trailing bytes.
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})", "abcdef"),
                   "overlaps");
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                                R"("b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})", "abcdef"),
                   "hole");
  EXPECT_ERROR_HAS(header_error(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", "abcdef"), "trailing");
}

TEST(Safetensors, RejectsBadMetadata) {
  EXPECT_ERROR_HAS(header_error(R"({"__metadata__":{"n":1}})"), "__metadata__ entry 'n' must be a string");
  EXPECT_ERROR_HAS(header_error(R"({"__metadata__":["x"]})"), "__metadata__ must be an object");
  EXPECT_ERROR_HAS(header_error(R"({"__metadata__":{"n":{"deep":"x"}}})"), "must be a string");
}

TEST(StrictJson, LimitsArraysAndDepth) {
  EXPECT_NO_THROW(parse_json_strict("[1,2,3]", "s", JsonLimits{2, 3}));
  EXPECT_ERROR_HAS(error_of([] { parse_json_strict("[1,2,3,4]", "s", JsonLimits{2, 3}); }), "more than 3 items");
  EXPECT_ERROR_HAS(error_of([] { parse_json_strict(std::string(100000, '['), "s"); }), "deeper than 8");
  EXPECT_ERROR_HAS(error_of([] { parse_json_strict(R"({"k":{"k":1,"k":2}})", "s"); }), "duplicate key 'k'");
  EXPECT_EQ(quote("a'b\x01" "c", 4), "'a'b\\x01...'");
}

TEST(MappedFile, MapsAndNamesMissingFiles) {
  TempDir dir("mapped");
  write_bytes(dir.path() / "f", "hello");
  MappedFile f(dir.path() / "f");
  ASSERT_EQ(f.size(), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f.data()), 5), "hello");
  EXPECT_TRUE(f.contains(f.data() + 1, 4));
  EXPECT_FALSE(f.contains(f.data() + 1, 5));
  MappedFile moved = std::move(f);
  EXPECT_EQ(moved.size(), 5u);
  EXPECT_EQ(f.data(), nullptr);
  write_bytes(dir.path() / "empty", "");
  EXPECT_EQ(MappedFile(dir.path() / "empty").size(), 0u);
  EXPECT_ERROR_HAS(error_of([&] { MappedFile m(dir.path() / "nope"); }), "nope: cannot open");
  EXPECT_ERROR_HAS(error_of([&] { MappedFile m(dir.path()); }), "not a regular file");
}

TEST(Safetensors, OpensFileFromDisk) {
  TempDir dir("open");
  write_bytes(dir.path() / "m.safetensors",
              safetensors_image(R"({"w":{"dtype":"BF16","shape":[2,1],"data_offsets":[0,4]}})", "\x01\x02\x03\x04"));
  auto f = SafetensorsFile::open(dir.path() / "m.safetensors");
  const auto* w = f.header.find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(std::to_integer<int>(f.data_of(*w)[2]), 3);
  write_bytes(dir.path() / "bad.safetensors", "12345678");
  EXPECT_ERROR_HAS(error_of([&] { SafetensorsFile::open(dir.path() / "bad.safetensors"); }), "bad.safetensors: header length");
}
