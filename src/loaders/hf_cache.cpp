// resolve_model_path: a local path as is, else a Hugging Face repo id looked up in the HF cache
// layout (reference/formats.md §7.2), downloaded into it when online (loaders/hub_download.h).
#include <system_error>

#include "core/error.h"
#include "loaders/hub_download.h"
#include "loaders/model_loader.h"
#include "loaders/strict_json.h"

namespace striker {

namespace fs = std::filesystem;

std::string resolve_model_path(const std::string& model, const HubRequest& request) {
  if (model.empty()) throw Error("model argument is empty: give a directory, a .gguf file or a repo id 'org/name'");
  std::error_code ec;
  if (fs::exists(model, ec)) return model;

  const auto spec = hub::parse_repo_spec(model);
  if (!spec)
    throw Error("model " + quote(model) +
                " is not an existing file or directory, nor a Hugging Face repo id 'org/name' (or 'org/name:file.gguf')");
  const hub::HubSettings settings = hub::settings_from_env(request.download_dir);
  hub::SnapshotRequest snapshot{*spec, request.revision.empty() ? "main" : request.revision, request.need};
  if (!settings.offline) return hub::download_snapshot(settings, snapshot);

  std::string why;
  if (auto cached = hub::cached_snapshot(settings, snapshot, why)) return *cached;
  throw Error("model " + quote(model) + " is not a local path and not in the Hugging Face cache " +
              settings.cache_dir.string() + " (chosen by " + settings.cache_chosen_by + "): " + why +
              "; HF_HUB_OFFLINE is set, so nothing is downloaded (unset it to download from " + settings.endpoint + ")");
}

}  // namespace striker
