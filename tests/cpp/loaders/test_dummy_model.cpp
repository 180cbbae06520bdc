// --load-format dummy on the host: the views it makes, their sizes, and that no weight file is
// needed (a folder with only config.json loads).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "loaders/dummy_model.h"
#include "loaders/loader_test_util.h"
#include "loaders/model_loader.h"
#include "model/config.h"

using namespace striker;
using namespace striker::test;

#define EXPECT_ERROR_HAS(expr, needle)                                               \
  do {                                                                               \
    const std::string e_ = (expr);                                                   \
    EXPECT_NE(e_.find(needle), std::string::npos) << "error was: '" << e_ << "'";    \
  } while (0)

namespace {

// micro_config() with every linear input a multiple of 64, as NVFP4 needs.
nlohmann::json nvfp4_micro_config() {
  auto c = micro_config();
  c["moe_intermediate_size"] = 64;
  c["shared_expert_intermediate_size"] = 64;
  return c;
}

size_t held_bytes(const WeightView& v) {
  return v.dtype == DType::NVFP4 ? v.nbytes + size_t(v.numel() / 16) : v.nbytes;
}

size_t total_held(const LoadedModel& m) {
  const FlintWeights& w = m.weights;
  size_t n = held_bytes(w.embed) + held_bytes(w.final_norm) + held_bytes(w.lm_head);
  auto mlp = [&](const MlpWeights& x) { n += held_bytes(x.gate) + held_bytes(x.up) + held_bytes(x.down); };
  for (const auto& l : w.layers) {
    for (const WeightView* v : {&l.input_norm, &l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.q_norm, &l.k_norm,
                                &l.sinks, &l.post_attn_norm, &l.router, &l.router_bias})
      n += held_bytes(*v);
    mlp(l.dense);
    mlp(l.shared);
    for (const auto& e : l.experts) mlp(e);
  }
  return n;
}

}  // namespace

TEST(DummyModel, Bf16FromConfigAloneMatchesItsSize) {
  TempDir dir("dummy");
  write_bytes(dir.path() / "config.json", micro_config().dump());
  LoadOptions o;
  o.load_format = "dummy";
  o.seed = 5;
  const LoadedModel m = load_model(dir.path().string(), o);
  EXPECT_EQ(m.weights.layers.size(), 3u);
  EXPECT_EQ(m.weights.lm_head.dtype, DType::BF16);
  EXPECT_EQ(m.weights.layers[1].experts.size(), 4u);
  EXPECT_EQ(m.weights.layers[1].router_bias.dtype, DType::F32);
  EXPECT_EQ(int64_t(total_held(m)), dummy_host_bytes(m.config, LinearFormat::bf16));
  // The seed picks the weights.
  o.seed = 6;
  const LoadedModel other = load_model(dir.path().string(), o);
  EXPECT_NE(0, std::memcmp(m.weights.lm_head.data, other.weights.lm_head.data, m.weights.lm_head.nbytes));
}

TEST(DummyModel, Nvfp4LinearWeightsOnly) {
  const FlintConfig c = parse_flint_config(nvfp4_micro_config(), "micro");
  const LoadedModel m = make_dummy_model(c, 1, LinearFormat::nvfp4);
  const FlintWeights& w = m.weights;
  for (const WeightView* v : {&w.lm_head, &w.layers[0].q_proj, &w.layers[0].o_proj, &w.layers[0].dense.down,
                              &w.layers[1].experts[3].down, &w.layers[2].shared.gate}) {
    EXPECT_EQ(v->dtype, DType::NVFP4) << v->name;
    ASSERT_NE(v->nvfp4_scales, nullptr) << v->name;
    EXPECT_EQ(int64_t(v->nbytes), v->numel() / 2) << v->name;
    EXPECT_TRUE(std::isfinite(v->scale2) && v->scale2 > 0) << v->name;
  }
  // Router, embedding and norms keep their checkpoint types.
  EXPECT_EQ(w.layers[1].router.dtype, DType::BF16);
  EXPECT_EQ(w.embed.dtype, DType::BF16);
  EXPECT_EQ(w.layers[1].input_norm.dtype, DType::BF16);
  EXPECT_EQ(int64_t(total_held(m)), dummy_host_bytes(c, LinearFormat::nvfp4));
  // Per-expert global scales, as a quantised GGUF stores them.
  EXPECT_NE(w.layers[1].experts[0].up.scale2, w.layers[1].experts[1].up.scale2);
}

TEST(DummyModel, Nvfp4NeedsInputsOfSixtyFour) {
  const FlintConfig c = parse_flint_config(micro_config(), "micro");  // experts' down_proj has 32 inputs
  EXPECT_ERROR_HAS(error_of([&] { make_dummy_model(c, 1, LinearFormat::nvfp4); }), "not a multiple of 64");
}

TEST(DummyModel, QuantizationValues) {
  EXPECT_FALSE(parse_quantization("").has_value());
  EXPECT_EQ(parse_quantization("nvfp4"), LinearFormat::nvfp4);
  EXPECT_EQ(parse_quantization("modelopt_fp4"), LinearFormat::nvfp4);
  EXPECT_EQ(parse_quantization("gguf"), LinearFormat::nvfp4);
  EXPECT_ERROR_HAS(error_of([] { parse_quantization("fp8"); }), "--quantization 'fp8' is not supported");
}

TEST(DummyModel, RefusesWhatDoesNotFit) {
  EXPECT_GT(host_memory_available(), 0);
  // Full-size Flint with experts 512x wider: ~11 TB even in NVFP4, more than any host; the check runs
  // before anything is allocated.
  std::ifstream in(shared_dir() / "fixtures/flint-config/config.json");
  auto j = nlohmann::json::parse(in);
  j["moe_intermediate_size"] = 512 * 512;
  const FlintConfig huge = parse_flint_config(j, "config.json");
  EXPECT_GT(dummy_host_bytes(huge, LinearFormat::nvfp4), int64_t(1) << 43);  // > 8 TiB
  EXPECT_ERROR_HAS(error_of([&] { make_dummy_model(huge, 0, LinearFormat::nvfp4); }), "of host memory, but only");
}
