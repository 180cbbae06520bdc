#include "loaders/safetensors_checkpoint.h"

#include <set>

#include "core/error.h"
#include "loaders/strict_json.h"

namespace striker {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kMaxIndexBytes = 64ull << 20;

bool is_plain_file_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\\') == std::string::npos && s.find('\0') == std::string::npos;
}

}  // namespace

std::map<std::string, std::string> parse_safetensors_index(std::string_view text, const std::string& source) {
  nlohmann::json j = parse_json_strict(text, source, JsonLimits{8, 1u << 20});
  if (!j.is_object()) throw Error(source + ": index must be a JSON object");
  if (auto meta = j.find("metadata"); meta != j.end() && !meta->is_null() && !meta->is_object())
    throw Error(source + ": 'metadata' must be an object");
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) throw Error(source + ": 'weight_map' is missing or not an object");
  if (wm->empty()) throw Error(source + ": 'weight_map' is empty");
  std::map<std::string, std::string> out;
  for (const auto& [name, shard] : wm->items()) {
    if (!shard.is_string()) throw Error(source + ": weight_map entry for tensor " + quote(name) + " must be a file name");
    const auto& file = shard.get_ref<const std::string&>();
    if (!is_plain_file_name(file))
      throw Error(source + ": weight_map entry for tensor " + quote(name) + " names " + quote(file) +
                  ", not a file in the checkpoint directory");
    out.emplace(name, file);
  }
  return out;
}

void SafetensorsCheckpoint::add_file_tensors(const SafetensorsFile& f) {
  for (const auto& t : f.header.tensors) {
    auto [it, inserted] = tensors_.emplace(t.name, CheckpointTensor{&f, &t});
    if (!inserted)
      throw Error(f.map->path().string() + ": tensor " + quote(t.name) + " is also in " +
                  it->second.file->map->path().string());
  }
}

SafetensorsCheckpoint SafetensorsCheckpoint::open(const fs::path& dir) {
  SafetensorsCheckpoint ck;
  const fs::path single = dir / kSafetensorsSingleFile;
  const fs::path index_path = dir / kSafetensorsIndexFile;
  if (fs::exists(single)) {
    ck.files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(single)));
    ck.add_file_tensors(*ck.files_.back());
    return ck;
  }
  if (!fs::exists(index_path))
    throw Error(dir.string() + ": no " + kSafetensorsSingleFile + " or " + kSafetensorsIndexFile +
                " (not a safetensors checkpoint directory)");

  const std::string source = index_path.string();
  MappedFile index_file(index_path);
  if (index_file.size() > kMaxIndexBytes)
    throw Error(source + ": index is " + std::to_string(index_file.size()) + " bytes, over the " +
                std::to_string(kMaxIndexBytes) + "-byte limit");
  auto weight_map = parse_safetensors_index(
      std::string_view(reinterpret_cast<const char*>(index_file.data()), index_file.size()), source);

  // Open each shard once, in name order, then check both directions of the mapping.
  std::map<std::string, const SafetensorsFile*> shards;
  for (const auto& [tensor, shard] : weight_map) {
    if (shards.count(shard)) continue;
    const fs::path shard_path = dir / shard;
    if (!fs::exists(shard_path))
      throw Error(source + ": shard " + quote(shard) + " (listed for tensor " + quote(tensor) + ") does not exist");
    ck.files_.push_back(std::make_unique<SafetensorsFile>(SafetensorsFile::open(shard_path)));
    shards.emplace(shard, ck.files_.back().get());
  }
  for (const auto& [tensor, shard] : weight_map) {
    const SafetensorsFile* f = shards.at(shard);
    if (f->header.find(tensor) == nullptr)
      throw Error(source + ": tensor " + quote(tensor) + " is listed in shard " + quote(shard) + " but " +
                  f->map->path().string() + " does not contain it");
  }
  for (const auto& [shard, f] : shards) {
    for (const auto& t : f->header.tensors) {
      auto it = weight_map.find(t.name);
      if (it == weight_map.end())
        throw Error(f->map->path().string() + ": tensor " + quote(t.name) + " is not listed in " + source);
      if (it->second != shard)
        throw Error(f->map->path().string() + ": tensor " + quote(t.name) + " is listed in " + source +
                    " under shard " + quote(it->second));
    }
    ck.add_file_tensors(*f);
  }
  return ck;
}

}  // namespace striker
