// load_model on make-model checkpoints, the trained fixture, and a matrix of corrupted ones.
#include <gtest/gtest.h>

#include <set>

#include <fstream>

#include "loaders/make_model.h"
#include "loader_test_util.h"
#include "loaders/flint_tensors.h"
#include "loaders/model_loader.h"
#include "loaders/safetensors_checkpoint.h"

using namespace striker;
using namespace striker::test;

namespace {

#define EXPECT_ERROR_HAS(expr, needle)                   \
  do {                                                   \
    std::string e_ = (expr);                             \
    EXPECT_NE(e_.find(needle), std::string::npos) << e_; \
  } while (0)

// Every view of `m`, in a flat list.
std::vector<const WeightView*> all_views(const LoadedModel& m) {
  std::vector<const WeightView*> v{&m.weights.embed, &m.weights.final_norm, &m.weights.lm_head};
  for (const auto& L : m.weights.layers) {
    for (const auto* w : {&L.input_norm, &L.q_proj, &L.k_proj, &L.v_proj, &L.o_proj, &L.q_norm, &L.k_norm, &L.sinks,
                          &L.post_attn_norm, &L.dense.gate, &L.dense.up, &L.dense.down, &L.router, &L.router_bias,
                          &L.shared.gate, &L.shared.up, &L.shared.down})
      if (!w->empty()) v.push_back(w);
    for (const auto& e : L.experts)
      for (const auto* w : {&e.gate, &e.up, &e.down}) v.push_back(w);
  }
  return v;
}

// The file mappings of this process under `dir`, from /proc/self/maps: [begin, end) ranges.
std::vector<std::pair<uintptr_t, uintptr_t>> file_mappings_under(const fs::path& dir) {
  std::vector<std::pair<uintptr_t, uintptr_t>> out;
  std::ifstream maps("/proc/self/maps");
  const std::string prefix = fs::canonical(dir).string() + "/";
  for (std::string line; std::getline(maps, line);) {
    auto path_at = line.find('/');
    if (path_at == std::string::npos || line.compare(path_at, prefix.size(), prefix) != 0) continue;
    uintptr_t lo = std::stoull(line.substr(0, line.find('-')), nullptr, 16);
    uintptr_t hi = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
    out.emplace_back(lo, hi);
  }
  return out;
}

// Checks that every expected tensor is bound, with the right size, inside a mapping of a file
// of the checkpoint directory (so the loader copied nothing).
void expect_views_inside_mappings(const LoadedModel& m, const fs::path& dir) {
  auto maps = file_mappings_under(dir);
  ASSERT_FALSE(maps.empty());
  auto specs = flint_tensor_specs(m.config);
  auto views = all_views(m);
  ASSERT_EQ(views.size(), specs.size());
  for (const auto* v : views) {
    ASSERT_FALSE(v->empty()) << v->name;
    EXPECT_EQ(v->nbytes, size_t(v->numel()) * dtype_size(v->dtype)) << v->name;
    bool inside = false;
    auto p = reinterpret_cast<uintptr_t>(v->data);
    for (auto [lo, hi] : maps) inside |= p >= lo && p + v->nbytes <= hi;
    EXPECT_TRUE(inside) << v->name << " does not point into a checkpoint mapping";
  }
}

// A micro checkpoint in a fresh dir, split into several shards.
struct Micro {
  TempDir dir{"micro"};
  explicit Micro(int64_t shard_bytes = 48 << 10, nlohmann::json cfg = micro_config()) {
    make_micro_checkpoint(dir.path(), cfg, shard_bytes);
  }
  fs::path path() const { return dir.path(); }
  nlohmann::json index() const { return nlohmann::json::parse(read_bytes(path() / kSafetensorsIndexFile)); }
  void set_index(const nlohmann::json& j) const { write_bytes(path() / kSafetensorsIndexFile, j.dump()); }
  fs::path shard_of(const std::string& tensor) const { return path() / index()["weight_map"][tensor].get<std::string>(); }
  // Reads the shard holding `tensor`, lets `edit` change its tensors, writes it back.
  template <class F>
  void edit_shard_of(const std::string& tensor, F&& edit) const {
    fs::path shard = shard_of(tensor);
    RawTensors ts = read_tensors(shard);
    edit(ts);
    write_tensors(shard, ts);
  }
  std::string load_error() const {
    std::string e = error_of([&] { load_model(path().string()); });
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    return e;
  }
};

const std::string kQ = "model.layers.1.self_attn.q_proj.weight";

}  // namespace

TEST(LoadModel, TinyMakeModelCheckpointLoadsWithViewsInsideMappings) {
  TempDir dir("tiny");
  MakeModelOptions o;
  o.config = shared_dir() / "fixtures" / "flint-config" / "config.tiny.json";
  o.tokenizer_dir = tokenizer_fixture();
  o.out_dir = dir.path();
  o.seed = 7;
  make_random_checkpoint(o);
  ASSERT_TRUE(fs::exists(dir.path() / kSafetensorsIndexFile));
  size_t calls = 0, last_done = 0, last_total = 0;
  LoadOptions lo;
  lo.on_progress = [&](size_t done, size_t total) {
    EXPECT_GE(done, last_done);
    ++calls, last_done = done, last_total = total;
  };
  LoadedModel m = load_model(dir.path().string(), lo);
  EXPECT_EQ(m.config.hidden_size, 256);
  EXPECT_EQ(m.weights.layers.size(), 7u);
  EXPECT_EQ(m.weights.layers[3].experts.size(), 16u);
  EXPECT_EQ(m.weights.embed.shape, (std::vector<int64_t>{151552, 256}));
  EXPECT_EQ(m.weights.layers[4].router_bias.dtype, DType::F32);
  expect_views_inside_mappings(m, dir.path());
  EXPECT_EQ(calls, flint_tensor_specs(m.config).size());
  EXPECT_EQ(last_done, last_total);
  auto index = nlohmann::json::parse(read_bytes(dir.path() / kSafetensorsIndexFile));
  EXPECT_EQ(index["metadata"]["total_size"].get<size_t>(), last_total);
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                        "chat_template.jinja"})
    EXPECT_TRUE(fs::exists(dir.path() / f)) << f;
}

TEST(LoadModel, TrainedSingleFileFixtureLoads) {
  const fs::path dir = shared_dir() / "fixtures" / "toolcall-model";
  LoadedModel m = load_model(dir.string());
  EXPECT_EQ(m.config.num_hidden_layers, 5);
  expect_views_inside_mappings(m, dir);
}

TEST(LoadModel, MicroSingleFileAndShardedBothLoad) {
  Micro sharded;
  EXPECT_GT(sharded.index()["weight_map"].size(), 10u);
  expect_views_inside_mappings(load_model(sharded.path().string()), sharded.path());
  Micro single(1 << 30);
  EXPECT_TRUE(fs::exists(single.path() / kSafetensorsSingleFile));
  EXPECT_FALSE(fs::exists(single.path() / kSafetensorsIndexFile));
  expect_views_inside_mappings(load_model(single.path().string()), single.path());
}

TEST(LoadModelCorrupt, MissingTensor) {
  Micro m;
  m.edit_shard_of(kQ, [](RawTensors& ts) { ts.erase(kQ); });
  auto index = m.index();
  index["weight_map"].erase(kQ);
  m.set_index(index);
  EXPECT_ERROR_HAS(m.load_error(), "tensor '" + kQ + "' is missing (expected BF16 [64, 64])");
}

TEST(LoadModelCorrupt, WrongShape) {
  Micro m;
  const std::string k = "model.layers.1.self_attn.k_proj.weight";  // [16, 64]
  m.edit_shard_of(k, [&](RawTensors& ts) { ts[k].shape = {64, 16}; });
  std::string e = m.load_error();
  EXPECT_ERROR_HAS(e, "tensor '" + k + "' has shape [64, 16], expected [16, 64]");
  EXPECT_ERROR_HAS(e, m.shard_of(k).string());
}

TEST(LoadModelCorrupt, WrongDtype) {
  Micro m;
  m.edit_shard_of(kQ, [](RawTensors& ts) { ts[kQ].dtype = "F16"; });
  EXPECT_ERROR_HAS(m.load_error(), "tensor '" + kQ + "' has dtype F16, expected BF16");
  Micro bias;
  const std::string b = "model.layers.2.mlp.gate.e_score_correction_bias";
  bias.edit_shard_of(b, [&](RawTensors& ts) {
    ts[b].dtype = "BF16";
    ts[b].data.resize(ts[b].data.size() / 2);
  });
  EXPECT_ERROR_HAS(bias.load_error(), "tensor '" + b + "' has dtype BF16, expected F32");
  Micro fp8;
  fp8.edit_shard_of(kQ, [](RawTensors& ts) {
    ts[kQ].dtype = "F8_E4M3";
    ts[kQ].data.resize(ts[kQ].data.size() / 2);
  });
  EXPECT_ERROR_HAS(fp8.load_error(), "has dtype F8_E4M3, expected BF16");
}

TEST(LoadModelCorrupt, F32SinksAndRouterAreAccepted) {
  Micro m;
  for (const std::string name : {"model.layers.1.self_attn.sinks", "model.layers.1.mlp.gate.weight"}) {
    m.edit_shard_of(name, [&](RawTensors& ts) {
      std::string f32;
      for (size_t i = 0; i < ts[name].data.size(); i += 2) f32 += std::string("\0\0", 2) + ts[name].data.substr(i, 2);
      ts[name] = RawTensor{"F32", ts[name].shape, f32};
    });
  }
  LoadedModel lm = load_model(m.path().string());
  EXPECT_EQ(lm.weights.layers[1].sinks.dtype, DType::F32);
  EXPECT_EQ(lm.weights.layers[1].router.dtype, DType::F32);
  expect_views_inside_mappings(lm, m.path());
}

TEST(LoadModel, MisalignedTensorIsCopiedAligned) {
  Micro m;
  const std::string b = "model.layers.1.mlp.gate.e_score_correction_bias";
  std::string original;
  m.edit_shard_of(b, [&](RawTensors& ts) { original = ts[b].data; });
  // Unaligned layout: an odd-sized U8 tensor placed before everything else.
  RawTensors ts = read_tensors(m.shard_of(b));
  const fs::path shard = m.shard_of(b);
  uint64_t file_offset = 0;
  for (int64_t odd = 1; odd <= 3; ++odd) {  // make sure the bias really lands off a 4-byte boundary
    ts["aaa.odd"] = RawTensor{"U8", {odd}, std::string(size_t(odd), 'x')};
    write_tensors(shard, ts, /*aligned=*/false);
    auto f = SafetensorsFile::open(shard);
    file_offset = f.header.data_start + f.header.find(b)->begin;
    if (file_offset % 4 != 0) break;
  }
  ASSERT_NE(file_offset % 4, 0u);
  auto index = m.index();
  index["weight_map"]["aaa.odd"] = m.shard_of(b).filename().string();
  m.set_index(index);
  LoadedModel lm = load_model(m.path().string());
  const WeightView& v = lm.weights.layers[1].router_bias;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.data) % 4, 0u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(v.data), v.nbytes), original);
}

TEST(LoadModelCorrupt, TruncatedShard) {
  Micro m;
  fs::path shard = m.shard_of(kQ);
  fs::resize_file(shard, fs::file_size(shard) - 100);
  std::string e = m.load_error();
  EXPECT_ERROR_HAS(e, shard.string());
  EXPECT_ERROR_HAS(e, "file truncated");
}

TEST(LoadModelCorrupt, BadIndexJson) {
  Micro m;
  write_bytes(m.path() / kSafetensorsIndexFile, "{\"weight_map\": {");
  EXPECT_ERROR_HAS(m.load_error(), "model.safetensors.index.json: invalid JSON");
  m.set_index({{"metadata", {}}});
  EXPECT_ERROR_HAS(m.load_error(), "'weight_map' is missing");
  m.set_index({{"weight_map", {{kQ, 3}}}});
  EXPECT_ERROR_HAS(m.load_error(), "weight_map entry for tensor '" + kQ + "' must be a file name");
  m.set_index({{"weight_map", {{kQ, "../../etc/passwd"}}}});
  EXPECT_ERROR_HAS(m.load_error(), "not a file in the checkpoint directory");
}

TEST(LoadModelCorrupt, MissingShard) {
  Micro m;
  fs::path shard = m.shard_of(kQ);
  fs::remove(shard);
  EXPECT_ERROR_HAS(m.load_error(), "shard '" + shard.filename().string() + "' (listed for tensor '");
}

TEST(LoadModelCorrupt, IndexPointsAtWrongShard) {
  Micro m;
  auto index = m.index();
  std::string right = index["weight_map"][kQ];
  std::string wrong = index["weight_map"]["lm_head.weight"];
  ASSERT_NE(right, wrong);
  index["weight_map"][kQ] = wrong;
  m.set_index(index);
  EXPECT_ERROR_HAS(m.load_error(), "tensor '" + kQ + "' is listed in shard '" + wrong + "' but");
}

TEST(LoadModelCorrupt, ShardTensorNotInIndex) {
  Micro m;
  m.edit_shard_of(kQ, [](RawTensors& ts) { ts["model.layers.1.extra.weight"] = RawTensor{"BF16", {2}, "abcd"}; });
  EXPECT_ERROR_HAS(m.load_error(), "tensor 'model.layers.1.extra.weight' is not listed in");
}

TEST(LoadModelCorrupt, UnexpectedFlintTensorIsAnErrorOthersAreIgnored) {
  Micro m;
  auto add = [&](const std::string& name) {
    m.edit_shard_of(kQ, [&](RawTensors& ts) { ts[name] = RawTensor{"BF16", {2}, "abcd"}; });
    auto index = m.index();
    index["weight_map"][name] = m.shard_of(kQ).filename().string();
    m.set_index(index);
  };
  add("mtp.extra.weight");  // outside model./lm_head: not Flint's business
  EXPECT_NO_THROW(load_model(m.path().string()));
  add("model.layers.7.input_layernorm.weight");
  EXPECT_ERROR_HAS(m.load_error(), "unexpected tensor 'model.layers.7.input_layernorm.weight'");
}

TEST(LoadModelCorrupt, BadConfigField) {
  Micro m;
  auto cfg = micro_config();
  cfg["hidden_size"] = "wide";
  write_bytes(m.path() / "config.json", cfg.dump());
  std::string e = m.load_error();
  EXPECT_ERROR_HAS(e, "config.json: field 'hidden_size' must be an integer");
  write_bytes(m.path() / "config.json", "{");
  EXPECT_ERROR_HAS(m.load_error(), "config.json: invalid JSON");
  fs::remove(m.path() / "config.json");
  EXPECT_ERROR_HAS(m.load_error(), "config.json: cannot open config file");
}

TEST(LoadModelCorrupt, ConfigDisagreesWithCheckpoint) {
  Micro m;
  auto cfg = micro_config();
  cfg["n_routed_experts"] = 5;
  write_bytes(m.path() / "config.json", cfg.dump());
  EXPECT_ERROR_HAS(m.load_error(), "tensor 'model.layers.1.mlp.gate.weight' has shape [4, 64], expected [5, 64]");
  cfg["n_routed_experts"] = 3;
  write_bytes(m.path() / "config.json", cfg.dump());
  EXPECT_ERROR_HAS(m.load_error(), "unexpected tensor 'model.layers.1.mlp.experts.3.");
}

TEST(LoadModelCorrupt, HostileShardHeader) {
  Micro m;
  fs::path shard = m.shard_of(kQ);
  std::string bytes = read_bytes(shard);
  bytes[7] = '\x7f';  // header length ~9e18
  write_bytes(shard, bytes);
  std::string e = m.load_error();
  EXPECT_ERROR_HAS(e, shard.string() + ": header length");
  write_bytes(shard, safetensors_image("{\"" + kQ + "\":{\"dtype\":\"BF16\",\"shape\":[64,64],\"data_offsets\":[8192,0]}}", ""));
  EXPECT_ERROR_HAS(m.load_error(), "are reversed");
}

TEST(LoadModel, NotACheckpointDirectoryAndFormats) {
  TempDir dir("empty");
  EXPECT_ERROR_HAS(error_of([&] { load_model(dir.path().string()); }), "config.json");
  write_bytes(dir.path() / "config.json", micro_config().dump());
  EXPECT_ERROR_HAS(error_of([&] { load_model(dir.path().string()); }), "no model.safetensors or");
  // A .gguf file, or a directory holding one and no safetensors, is read as GGUF.
  write_bytes(dir.path() / "m.gguf", "GGUF");
  EXPECT_ERROR_HAS(error_of([&] { load_model((dir.path() / "m.gguf").string()); }), "m.gguf: file is 4 bytes, too short");
  EXPECT_ERROR_HAS(error_of([&] { load_model(dir.path().string()); }), "m.gguf: file is 4 bytes, too short");
  fs::remove(dir.path() / "m.gguf");
  LoadOptions nvfp4;
  nvfp4.quantization = "nvfp4";  // a directory without .gguf is BF16 safetensors: refused before reading
  EXPECT_ERROR_HAS(error_of([&] { load_model(dir.path().string(), nvfp4); }), "BF16 safetensors checkpoint");
  nvfp4.quantization = "q4_k";
  EXPECT_ERROR_HAS(error_of([&] { load_model(dir.path().string(), nvfp4); }), "--quantization 'q4_k' is not supported");
  LoadOptions bad;
  bad.load_format = "pickle";
  EXPECT_ERROR_HAS(error_of([&] { load_model(dir.path().string(), bad); }), "not one of auto, safetensors, gguf, dummy");
  EXPECT_ERROR_HAS(error_of([&] { load_model((dir.path() / "config.json").string()); }), "not a checkpoint directory");
}

TEST(LoadModel, HfConfigPathOverridesModelConfig) {
  Micro m;
  TempDir other("cfg");
  auto cfg = micro_config();
  cfg["rope_theta"] = 500.0;
  write_bytes(other.path() / "config.json", cfg.dump());
  LoadOptions o;
  o.hf_config_path = other.path().string();
  EXPECT_FLOAT_EQ(load_model(m.path().string(), o).config.rope_theta, 500.0f);
}
