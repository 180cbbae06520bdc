// Downloading the files a model needs from the Hugging Face Hub into the standard HF cache, as
// huggingface_hub's snapshot_download / hf_hub_download do: the revision is resolved to a
// commit through /api/models/{repo}/revision/{rev}; each file is HEADed at
// /{repo}/resolve/{commit}/{file} (ETag / X-Linked-Etag name its blob, X-Linked-Size or
// Content-Length give its size), fetched into blobs/<etag>.incomplete (resumed with Range,
// retried on a dropped connection), checked (size; SHA-256 for LFS files, the git blob SHA-1
// for regular ones), renamed to blobs/<etag> and linked from snapshots/<commit>/<file>; then
// refs/<revision> records the commit. A cache written here is read by huggingface_hub, and
// the other way round.
#pragma once
#include <optional>
#include <string>

#include "loaders/hub_repo.h"

namespace striker::hub {

struct SnapshotRequest {
  RepoSpec spec;
  std::string revision = "main";
  Need need = Need::model;
};

// Downloads what is missing and returns the snapshot folder, or the .gguf file in it when the
// weights are one GGUF file. Throws striker::Error naming the repo (and HF_TOKEN for 401/403).
// When the Hub cannot be reached or refuses, a complete-looking cached snapshot of the same
// revision is used instead, with a warning on stderr (huggingface_hub does the same).
std::string download_snapshot(const HubSettings& settings, const SnapshotRequest& request);

// The cached snapshot for the request's revision (the .gguf file in it when one is named), or
// nullopt with `why` saying what is missing. No network.
std::optional<std::string> cached_snapshot(const HubSettings& settings, const SnapshotRequest& request,
                                           std::string& why);

}  // namespace striker::hub
