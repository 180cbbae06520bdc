// The GGUF writer's output reads back through the strict GGUF reader.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "loaders/gguf.h"
#include "loaders/gguf_writer.h"

using namespace striker;

TEST(GgufWriter, RoundTripsThroughTheReader) {
  auto path = std::filesystem::temp_directory_path() / ("striker_gguf_rt_" + std::to_string(::getpid()) + ".gguf");
  GgufWriter w;
  w.add_string("general.architecture", "flint");
  w.add_u32("flint.block_count", 7);
  w.add_f32("flint.rope.freq_base", 10000.0f);
  w.add_bool("flint.expert_weights_norm", true);
  w.add("flint.pattern", GgufValueType::ARRAY, nlohmann::json::array({true, false, true}), GgufValueType::BOOL);
  w.add_tensor("a.weight", 0, {3, 2}, [](std::byte* d, size_t n) {
    for (size_t i = 0; i < n / 4; ++i) {
      float f = float(i);
      std::memcpy(d + 4 * i, &f, 4);
    }
  });
  w.add_tensor("b.weight", 40, {64, 2}, [](std::byte* d, size_t n) { std::memset(d, 0x11, n); });
  w.write(path.string());

  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.get_string("general.architecture"), "flint");
  EXPECT_EQ(f.get_int("flint.block_count"), 7);
  EXPECT_EQ(f.get_float("flint.rope.freq_base"), 10000.0);
  EXPECT_EQ(f.get_bool("flint.expert_weights_norm"), true);
  EXPECT_EQ(f.get_int_array("flint.pattern"), (std::vector<int64_t>{1, 0, 1}));
  const GgufTensorInfo* a = f.find_tensor("a.weight");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->torch_shape(), (std::vector<int64_t>{2, 3}));
  float v5;
  std::memcpy(&v5, f.tensor_data(*a) + 20, 4);
  EXPECT_EQ(v5, 5.0f);
  const GgufTensorInfo* b = f.find_tensor("b.weight");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->nbytes, 72u);
  EXPECT_EQ(uint8_t(f.tensor_data(*b)[71]), 0x11);
  std::filesystem::remove(path);
}
