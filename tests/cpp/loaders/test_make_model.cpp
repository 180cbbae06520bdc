// make-model: determinism, layout, and the statistics of its random weights.
#include <gtest/gtest.h>

#include <cmath>

#include "core/bf16.h"
#include "loader_test_util.h"
#include "loaders/counter_rng.h"
#include "loaders/make_model.h"
#include "loaders/model_loader.h"
#include "loaders/safetensors_checkpoint.h"

using namespace striker;
using namespace striker::test;

namespace {

struct Stats {
  double mean = 0, stddev = 0;
};

Stats stats_of(const WeightView& v) {
  double s = 0, s2 = 0;
  const int64_t n = v.numel();
  for (int64_t i = 0; i < n; ++i) {
    double x;
    if (v.dtype == DType::F32) {
      float f;
      std::memcpy(&f, v.data + 4 * i, 4);
      x = f;
    } else {
      bf16 b;
      std::memcpy(&b.bits, v.data + 2 * i, 2);
      x = bf16_to_float(b);
    }
    s += x, s2 += x * x;
  }
  Stats st;
  st.mean = s / double(n);
  st.stddev = std::sqrt(std::max(0.0, s2 / double(n) - st.mean * st.mean));
  return st;
}

std::map<std::string, std::string> checkpoint_files(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out[e.path().filename().string()] = read_bytes(e.path());
  return out;
}

}  // namespace

TEST(CounterRng, StandardNormalMoments) {
  double s = 0, s2 = 0, s4 = 0;
  const uint64_t key = stream_key(42, "t");
  const int pairs = 200000;
  for (int i = 0; i < pairs; ++i) {
    float z[2];
    normal_pair(key, uint64_t(i), z[0], z[1]);
    for (float x : z) s += x, s2 += double(x) * x, s4 += double(x) * x * x * x;
  }
  const double n = 2.0 * pairs;
  EXPECT_NEAR(s / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.01);
  EXPECT_NEAR(s4 / n, 3.0, 0.05);  // Gaussian kurtosis
  EXPECT_NE(stream_key(42, "t"), stream_key(43, "t"));
  EXPECT_NE(stream_key(42, "t"), stream_key(42, "u"));
}

TEST(MakeModel, SameSeedSameBytesOtherSeedOtherWeights) {
  TempDir a("a"), b("b"), c("c");
  make_micro_checkpoint(a.path(), micro_config(), 48 << 10, 5);
  make_micro_checkpoint(b.path(), micro_config(), 48 << 10, 5);
  make_micro_checkpoint(c.path(), micro_config(), 48 << 10, 6);
  auto fa = checkpoint_files(a.path()), fb = checkpoint_files(b.path()), fc = checkpoint_files(c.path());
  EXPECT_EQ(fa, fb);
  ASSERT_TRUE(fa.count(kSafetensorsIndexFile));
  EXPECT_EQ(fa[kSafetensorsIndexFile], fc[kSafetensorsIndexFile]);  // same layout
  const std::string first_shard = nlohmann::json::parse(fa[kSafetensorsIndexFile])["weight_map"]["lm_head.weight"];
  ASSERT_TRUE(fa.count(first_shard) && fc.count(first_shard));
  EXPECT_EQ(fa[first_shard].size(), fc[first_shard].size());
  EXPECT_NE(fa[first_shard], fc[first_shard]);
}

TEST(MakeModel, WeightsDoNotDependOnSharding) {
  TempDir a("a"), b("b");
  make_micro_checkpoint(a.path(), micro_config(), 48 << 10, 9);
  make_micro_checkpoint(b.path(), micro_config(), 1 << 30, 9);
  LoadedModel ma = load_model(a.path().string()), mb = load_model(b.path().string());
  const WeightView &x = ma.weights.layers[2].experts[3].down, &y = mb.weights.layers[2].experts[3].down;
  ASSERT_EQ(x.nbytes, y.nbytes);
  EXPECT_EQ(std::memcmp(x.data, y.data, x.nbytes), 0);
}

TEST(MakeModel, ScalesFollowTheConformanceRecipe) {
  TempDir dir("scales");
  auto cfg = micro_config();
  cfg["vocab_size"] = 4096;  // enough entries for tight moments
  cfg["hidden_size"] = 256;
  make_micro_checkpoint(dir.path(), cfg, 1 << 30, 3);
  LoadedModel m = load_model(dir.path().string());
  const auto& L = m.weights.layers[1];
  auto expect_std = [](const WeightView& v, double mean, double stddev, double tol) {
    Stats s = stats_of(v);
    EXPECT_NEAR(s.mean, mean, tol * 3) << v.name;
    EXPECT_NEAR(s.stddev, stddev, stddev * tol) << v.name;
  };
  expect_std(m.weights.embed, 0.0, 0.5, 0.02);
  expect_std(m.weights.lm_head, 0.0, 1.0 / 16, 0.02);
  expect_std(L.q_proj, 0.0, 1.0 / 16, 0.05);
  expect_std(L.o_proj, 0.0, 0.2 / 8, 0.05);            // fan_in = 4 heads * 16
  expect_std(L.experts[0].down, 0.0, 0.2 / std::sqrt(32.0), 0.05);
  expect_std(L.shared.down, 0.0, 0.2 / std::sqrt(32.0), 0.05);
  expect_std(m.weights.layers[0].dense.down, 0.0, 0.2 / std::sqrt(128.0), 0.05);
  expect_std(L.input_norm, 1.0, 0.05, 0.3);
  expect_std(L.post_attn_norm, 0.5, 0.05, 0.3);  // damps the MLP branches (make_model.cpp)
  Stats sinks = stats_of(L.sinks), bias = stats_of(L.router_bias);
  EXPECT_GT(sinks.stddev, 0.3);  // clearly non-zero sink logits
  EXPECT_EQ(L.router_bias.dtype, DType::F32);
  EXPECT_GT(bias.stddev, 1e-3);
  EXPECT_LT(bias.stddev, 0.1);
  expect_std(L.router, 0.0, 3.0 / 16, 0.15);  // logits ~1.5 for the RMS-0.5 MLP inputs
}

TEST(MakeModel, RerunReplacesOldCheckpointAndKeepsOtherFiles) {
  TempDir dir("rerun");
  make_micro_checkpoint(dir.path(), micro_config(), 48 << 10);
  write_bytes(dir.path() / "notes.txt", "mine");
  make_micro_checkpoint(dir.path(), micro_config(), 1 << 30);
  EXPECT_TRUE(fs::exists(dir.path() / kSafetensorsSingleFile));
  EXPECT_FALSE(fs::exists(dir.path() / kSafetensorsIndexFile));
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_NE(e.path().filename().string().rfind("model-", 0), 0u) << "stale shard " << e.path();
  EXPECT_EQ(read_bytes(dir.path() / "notes.txt"), "mine");
  EXPECT_NO_THROW(load_model(dir.path().string()));
}

TEST(MakeModel, BadInputsAreClearErrors) {
  TempDir dir("bad");
  MakeModelOptions o;
  o.config = dir.path() / "missing.json";
  o.tokenizer_dir = tokenizer_fixture();
  o.out_dir = dir.path() / "out";
  EXPECT_NE(error_of([&] { make_random_checkpoint(o); }).find("missing.json"), std::string::npos);
  write_bytes(dir.path() / "c.json", micro_config().dump());
  o.config = dir.path() / "c.json";
  o.tokenizer_dir = dir.path();
  EXPECT_NE(error_of([&] { make_random_checkpoint(o); }).find("tokenizer directory has no tokenizer.json"),
            std::string::npos);
  o.tokenizer_dir = tokenizer_fixture();
  o.max_shard_bytes = 0;
  EXPECT_NE(error_of([&] { make_random_checkpoint(o); }).find("shard size"), std::string::npos);
}
