// resolve_model_path: a local path as is, else a Hugging Face repo id looked up in the HF
// cache layout (reference/formats.md §7.2). There is no downloader in this build.
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "loaders/model_loader.h"
#include "loaders/strict_json.h"

namespace striker {

namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

fs::path expand_home(const std::string& p) {
  if (p.size() >= 1 && p[0] == '~' && (p.size() == 1 || p[1] == '/')) return fs::path(env("HOME") + p.substr(1));
  return fs::path(p);
}

// The hub cache folder and which setting chose it, in huggingface_hub's order of precedence.
std::pair<fs::path, std::string> hub_cache_dir() {
  if (auto v = env("HF_HUB_CACHE"); !v.empty()) return {expand_home(v), "HF_HUB_CACHE"};
  if (auto v = env("HUGGINGFACE_HUB_CACHE"); !v.empty()) return {expand_home(v), "HUGGINGFACE_HUB_CACHE"};
  if (auto v = env("HF_HOME"); !v.empty()) return {expand_home(v) / "hub", "HF_HOME"};
  if (auto v = env("XDG_CACHE_HOME"); !v.empty()) return {expand_home(v) / "huggingface" / "hub", "XDG_CACHE_HOME"};
  return {expand_home("~/.cache/huggingface/hub"), "the default"};
}

bool env_flag(const char* name) {
  std::string v = env(name);
  for (auto& c : v) c = char(std::toupper(static_cast<unsigned char>(c)));
  return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

bool is_repo_part(const std::string& s) {
  if (s.empty() || s.size() > 96 || s.front() == '-' || s.front() == '.' || s.back() == '-' || s.back() == '.')
    return false;
  if (s.find("..") != std::string::npos || s.find("--") != std::string::npos) return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '-' && c != '_' && c != '.') return false;
  return true;
}

// A commit hash or ref target: letters and digits only, so it cannot leave snapshots/.
bool is_revision(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (unsigned char c : s)
    if (!std::isalnum(c)) return false;
  return true;
}

}  // namespace

std::string resolve_model_path(const std::string& model) {
  if (model.empty()) throw Error("model argument is empty: give a directory, a .gguf file or a repo id 'org/name'");
  std::error_code ec;
  if (fs::exists(model, ec)) return model;

  const auto slash = model.find('/');
  const bool repo_id = slash != std::string::npos && model.find('/', slash + 1) == std::string::npos &&
                       is_repo_part(model.substr(0, slash)) && is_repo_part(model.substr(slash + 1));
  if (!repo_id)
    throw Error("model " + quote(model) + " is not an existing file or directory, nor a Hugging Face repo id 'org/name'");

  const auto [cache, chosen_by] = hub_cache_dir();
  const fs::path repo = cache / ("models--" + model.substr(0, slash) + "--" + model.substr(slash + 1));
  const fs::path ref = repo / "refs" / "main";
  std::string why;
  std::ifstream in(ref);
  if (!in) {
    why = "no " + ref.string();
  } else {
    std::stringstream ss;
    ss << in.rdbuf();
    std::string rev = ss.str();
    while (!rev.empty() && std::isspace(static_cast<unsigned char>(rev.back()))) rev.pop_back();
    if (!is_revision(rev)) {
      why = ref.string() + " does not hold a commit hash";
    } else {
      const fs::path snapshot = repo / "snapshots" / rev;
      if (fs::is_directory(snapshot, ec)) return snapshot.string();
      why = "no snapshot folder " + snapshot.string();
    }
  }
  const std::string fetch = env_flag("HF_HUB_OFFLINE") || env_flag("TRANSFORMERS_OFFLINE")
                                ? "HF_HUB_OFFLINE is set, so nothing is downloaded"
                                : "downloading is not supported in this build; fetch it with "
                                  "'huggingface-cli download " + model + "' or pass a local directory";
  throw Error("model " + quote(model) + " is not a local path and not in the Hugging Face cache " + cache.string() +
              " (chosen by " + chosen_by + "): " + why + "; " + fetch);
}

}  // namespace striker
