// Helpers for loader tests: temp directories, raw safetensors files built by hand, and a tiny
// "micro" Flint checkpoint that can be made and corrupted in milliseconds.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace striker::test {

namespace fs = std::filesystem;

// A fresh, empty directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline fs::path shared_dir() { return fs::path(STRIKER_SHARED_DIR); }
inline fs::path tokenizer_fixture() { return shared_dir() / "fixtures" / "flint-tokenizer"; }

// A file image: 8-byte length + header text (as given, unpadded) + data bytes.
std::string safetensors_image(const std::string& header, const std::string& data);
void write_bytes(const fs::path& p, const std::string& bytes);
std::string read_bytes(const fs::path& p);

// One tensor of a checkpoint file, with its raw bytes.
struct RawTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::string data;
};
using RawTensors = std::map<std::string, RawTensor>;

// Reads every tensor of a (valid) safetensors file; writes a valid file from tensors. `aligned`
// lays it out like the reference writer (header padded to 8, widest dtypes first), otherwise
// tensors follow in name order right after the unpadded header.
RawTensors read_tensors(const fs::path& p);
void write_tensors(const fs::path& p, const RawTensors& tensors, bool aligned = true);

// config.json of a very small Flint (vocab 64, H 64, 3 layers: 1 dense, 2 MoE with 4 experts).
nlohmann::json micro_config();
// Writes config `cfg` and a random checkpoint for it into `dir` (sharded at `shard_bytes`).
void make_micro_checkpoint(const fs::path& dir, const nlohmann::json& cfg, int64_t shard_bytes, uint64_t seed = 1);

// The message of the striker::Error `f` throws, or "" when it throws nothing.
template <class F>
std::string error_of(F&& f);

}  // namespace striker::test

#include "core/error.h"

template <class F>
std::string striker::test::error_of(F&& f) {
  try {
    f();
  } catch (const striker::Error& e) {
    return e.what();
  }
  return "";
}
