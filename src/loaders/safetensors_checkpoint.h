// A Hugging Face safetensors checkpoint directory: either one `model.safetensors`, or shards
// listed by `model.safetensors.index.json` (weight_map: tensor name -> shard file name).
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loaders/safetensors.h"

namespace striker {

inline constexpr const char* kSafetensorsSingleFile = "model.safetensors";
inline constexpr const char* kSafetensorsIndexFile = "model.safetensors.index.json";

struct CheckpointTensor {
  const SafetensorsFile* file = nullptr;
  const SafetensorsTensor* tensor = nullptr;
  const std::byte* data() const { return file->data_of(*tensor); }
};

class SafetensorsCheckpoint {
 public:
  // Opens and validates every file of the checkpoint in `dir` (the single file when present,
  // as transformers does, else the index and all of its shards). Throws striker::Error.
  static SafetensorsCheckpoint open(const std::filesystem::path& dir);

  // Every tensor of the checkpoint by name.
  const std::map<std::string, CheckpointTensor>& tensors() const { return tensors_; }
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  void add_file_tensors(const SafetensorsFile& f);

  std::vector<std::unique_ptr<SafetensorsFile>> files_;  // stable addresses for CheckpointTensor
  std::map<std::string, CheckpointTensor> tensors_;
};

// Reads and validates a `model.safetensors.index.json`: returns tensor name -> shard file name.
// Shard names must be plain file names (no directories), so an index cannot point outside `dir`.
std::map<std::string, std::string> parse_safetensors_index(std::string_view text, const std::string& source);

}  // namespace striker
