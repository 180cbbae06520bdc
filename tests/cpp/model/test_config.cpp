#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <fstream>

#include "core/error.h"
#include "model/config.h"

using namespace striker;

namespace {
nlohmann::json fixture(const char* name) {
  std::ifstream in(std::string(STRIKER_SHARED_DIR) + "/fixtures/flint-config/" + name);
  return nlohmann::json::parse(in);
}
std::string error_of(const nlohmann::json& j) {
  try {
    parse_flint_config(j, "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(Config, ParsesFullSizeFlint) {
  auto c = parse_flint_config(fixture("config.json"), "config.json");
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_hidden_layers, 49);
  EXPECT_EQ(c.num_full_layers(), 14);
  EXPECT_EQ(c.num_sliding_layers(), 35);
  EXPECT_EQ(c.full_kv_bytes_per_token(), 28 * 1024);
  EXPECT_EQ(c.sliding_window, 513);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_FLOAT_EQ(c.routed_scaling_factor, 2.5f);
}

TEST(Config, ParsesTiny) {
  auto c = parse_flint_config(fixture("config.tiny.json"), "config.tiny.json");
  EXPECT_EQ(c.num_hidden_layers, 7);
  EXPECT_EQ(c.sliding_window, 17);
  EXPECT_TRUE(c.is_sliding_layer(0));
  EXPECT_FALSE(c.is_sliding_layer(3));
}

TEST(Config, ErrorsNameTheField) {
  auto j = fixture("config.tiny.json");
  auto bad = j; bad.erase("hidden_size");
  EXPECT_NE(error_of(bad).find("'hidden_size' is missing"), std::string::npos);
}

TEST(Config, RejectsInconsistentFields) {
  auto j = fixture("config.tiny.json");
  struct Case { const char* field; nlohmann::json value; const char* expect; } cases[] = {
      {"layer_types", nlohmann::json::array({"sliding_attention"}), "'layer_types' has 1 entries"},
      {"num_key_value_heads", 3, "'num_key_value_heads'"},
      {"scoring_func", "softmax", "'scoring_func'"},
      {"head_dim", "32", "'head_dim' must be an integer"},
      {"num_experts_per_tok", 99, "'num_experts_per_tok'"},
      {"hidden_size", 0, "'hidden_size' must be >= 1"},
  };
  for (const auto& c : cases) {
    auto bad = j;
    bad[c.field] = c.value;
    EXPECT_NE(error_of(bad).find(c.expect), std::string::npos) << c.field << ": " << error_of(bad);
  }
}
