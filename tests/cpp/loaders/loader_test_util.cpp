#include "loader_test_util.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "loaders/make_model.h"
#include "loaders/safetensors.h"

namespace striker::test {

TempDir::TempDir(const std::string& tag) {
  static std::atomic<int> counter{0};
  path_ = fs::temp_directory_path() /
          ("striker_loaders_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::remove_all(path_);
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string safetensors_image(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return out + header + data;
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

RawTensors read_tensors(const fs::path& p) {
  std::string image = read_bytes(p);
  auto h = parse_safetensors({reinterpret_cast<const std::byte*>(image.data()), image.size()}, p.string());
  RawTensors out;
  for (const auto& t : h.tensors)
    out[t.name] = RawTensor{t.dtype_name, t.shape, image.substr(size_t(h.data_start + t.begin), size_t(t.nbytes()))};
  return out;
}

void write_tensors(const fs::path& p, const RawTensors& tensors, bool aligned) {
  std::vector<std::pair<std::string, const RawTensor*>> order;
  for (const auto& [name, t] : tensors) order.emplace_back(name, &t);
  auto width = [](const RawTensor* t) {
    size_t n = 1;
    for (auto d : t->shape) n *= size_t(d);
    return n == 0 ? 1 : t->data.size() / n;
  };
  if (aligned)
    std::stable_sort(order.begin(), order.end(), [&](auto& a, auto& b) { return width(a.second) > width(b.second); });
  nlohmann::json h = nlohmann::json::object();
  std::string data;
  for (const auto& [name, t] : order) {
    h[name] = {{"dtype", t->dtype}, {"shape", t->shape}, {"data_offsets", {data.size(), data.size() + t->data.size()}}};
    data += t->data;
  }
  std::string header = h.dump();
  if (aligned) header.append((8 - header.size() % 8) % 8, ' ');
  write_bytes(p, safetensors_image(header, data));
}

nlohmann::json micro_config() {
  std::ifstream in(shared_dir() / "fixtures" / "flint-config" / "config.tiny.json");
  nlohmann::json c = nlohmann::json::parse(in);
  c["vocab_size"] = 64;
  c["hidden_size"] = 64;
  c["num_hidden_layers"] = 3;
  c["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};
  c["num_attention_heads"] = 4;
  c["num_key_value_heads"] = 1;
  c["head_dim"] = 16;
  c["intermediate_size"] = 128;
  c["moe_intermediate_size"] = 32;
  c["shared_expert_intermediate_size"] = 32;
  c["n_routed_experts"] = 4;
  c["num_experts_per_tok"] = 2;
  c["first_k_dense_replace"] = 1;
  c.erase("eos_token_id");  // the GLM stop ids lie outside a 64-token vocabulary
  c.erase("pad_token_id");
  return c;
}

void make_micro_checkpoint(const fs::path& dir, const nlohmann::json& cfg, int64_t shard_bytes, uint64_t seed) {
  fs::create_directories(dir);
  const fs::path config = dir / "config.source.json";
  write_bytes(config, cfg.dump(2));
  MakeModelOptions o;
  o.config = config;
  o.tokenizer_dir = tokenizer_fixture();
  o.out_dir = dir;
  o.seed = seed;
  o.max_shard_bytes = shard_bytes;
  make_random_checkpoint(o);
  fs::remove(config);
}

}  // namespace striker::test
