#include "loaders/hub_repo.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "loaders/strict_json.h"

namespace striker::hub {

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

fs::path expand_home(const std::string& p) {
  if (p.size() >= 1 && p[0] == '~' && (p.size() == 1 || p[1] == '/')) return fs::path(env("HOME") + p.substr(1));
  return fs::path(p);
}

bool env_flag(const char* name) {
  std::string v = env(name);
  for (auto& c : v) c = char(std::toupper(static_cast<unsigned char>(c)));
  return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

double env_seconds(const char* name, double fallback) {
  const std::string v = env(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  const double s = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !(s > 0))
    throw Error(std::string(name) + " must be a positive number of seconds, got " + quote(v));
  return s;
}

// HF_HOME, else XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface (huggingface_hub's constants).
fs::path hf_home() {
  if (auto v = env("HF_HOME"); !v.empty()) return expand_home(v);
  if (auto v = env("XDG_CACHE_HOME"); !v.empty()) return expand_home(v) / "huggingface";
  return expand_home("~/.cache/huggingface");
}

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

bool is_repo_part(const std::string& s) {
  if (s.empty() || s.size() > 96 || s.front() == '-' || s.front() == '.' || s.back() == '-' || s.back() == '.')
    return false;
  if (s.find("..") != std::string::npos || s.find("--") != std::string::npos) return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '-' && c != '_' && c != '.') return false;
  return true;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::optional<RepoSpec> parse_repo_spec(const std::string& s) {
  RepoSpec spec;
  std::string id = s;
  if (const auto colon = s.find(':'); colon != std::string::npos) {
    spec.file = s.substr(colon + 1);
    id = s.substr(0, colon);
    if (!ends_with(spec.file, ".gguf") || !is_safe_repo_file(spec.file)) return std::nullopt;
  }
  const auto slash = id.find('/');
  if (slash == std::string::npos || id.find('/', slash + 1) != std::string::npos) return std::nullopt;
  if (!is_repo_part(id.substr(0, slash)) || !is_repo_part(id.substr(slash + 1))) return std::nullopt;
  spec.repo_id = id;
  return spec;
}

HubSettings settings_from_env(const std::string& download_dir) {
  HubSettings s;
  if (auto v = env("HF_ENDPOINT"); !v.empty()) {
    while (!v.empty() && v.back() == '/') v.pop_back();
    s.endpoint = v;
  }
  if (!download_dir.empty()) {
    s.cache_dir = expand_home(download_dir);
    s.cache_chosen_by = "--download-dir";
  } else if (auto v = env("HF_HUB_CACHE"); !v.empty()) {
    s.cache_dir = expand_home(v);
    s.cache_chosen_by = "HF_HUB_CACHE";
  } else if (auto v2 = env("HUGGINGFACE_HUB_CACHE"); !v2.empty()) {
    s.cache_dir = expand_home(v2);
    s.cache_chosen_by = "HUGGINGFACE_HUB_CACHE";
  } else {
    s.cache_dir = hf_home() / "hub";
    s.cache_chosen_by = !env("HF_HOME").empty() ? "HF_HOME" : !env("XDG_CACHE_HOME").empty() ? "XDG_CACHE_HOME" : "the default";
  }
  s.offline = env_flag("HF_HUB_OFFLINE") || env_flag("TRANSFORMERS_OFFLINE");
  if (auto v = trim(env("HF_TOKEN")); !v.empty()) {
    s.token = v;
    s.token_source = "HF_TOKEN";
  } else if (auto v2 = trim(env("HUGGING_FACE_HUB_TOKEN")); !v2.empty()) {
    s.token = v2;
    s.token_source = "HUGGING_FACE_HUB_TOKEN";
  } else {
    const fs::path file = !env("HF_TOKEN_PATH").empty() ? expand_home(env("HF_TOKEN_PATH")) : hf_home() / "token";
    std::ifstream in(file);
    std::stringstream ss;
    if (in) ss << in.rdbuf();
    if (auto v3 = trim(ss.str()); !v3.empty()) {
      s.token = v3;
      s.token_source = file.string();
    }
  }
  s.etag_timeout_s = env_seconds("HF_HUB_ETAG_TIMEOUT", s.etag_timeout_s);
  s.download_timeout_s = env_seconds("HF_HUB_DOWNLOAD_TIMEOUT", s.download_timeout_s);
  return s;
}

bool is_commit_hash(const std::string& s) {
  return s.size() == 40 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string url_quote(const std::string& s, const std::string& safe) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~' || safe.find(char(c)) != std::string::npos) {
      out += char(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string api_revision_url(const std::string& endpoint, const std::string& repo_id, const std::string& revision) {
  return endpoint + "/api/models/" + repo_id + "/revision/" + url_quote(revision, "");
}

std::string resolve_url(const std::string& endpoint, const std::string& repo_id, const std::string& revision,
                        const std::string& file) {
  return endpoint + "/" + repo_id + "/resolve/" + url_quote(revision, "") + "/" + url_quote(file);
}

std::string url_origin(const std::string& url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string::npos || scheme_end == 0) return "";
  auto host_end = url.find_first_of("/?#", scheme_end + 3);
  std::string origin = url.substr(0, host_end);
  // Credentials before '@' are not part of the origin.
  if (const auto at = origin.find('@', scheme_end + 3); at != std::string::npos)
    origin = origin.substr(0, scheme_end + 3) + origin.substr(at + 1);
  for (auto& c : origin) c = char(std::tolower(static_cast<unsigned char>(c)));
  return origin;
}

std::string normalize_etag(const std::string& value) {
  std::string v = trim(value);
  if (v.rfind("W/", 0) == 0) v = v.substr(2);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  return v;
}

void add_header_line(const std::string& line, Headers& headers) {
  if (line.rfind("HTTP/", 0) == 0) {
    headers.clear();
    return;
  }
  const auto colon = line.find(':');
  if (colon == std::string::npos || colon == 0) return;
  std::string name = line.substr(0, colon);
  for (auto& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
  headers[name] = trim(line.substr(colon + 1));
}

FileMetadata file_metadata(const Headers& headers, long status, const std::string& url) {
  auto get = [&](const char* name) {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  };
  auto to_size = [](const std::string& v) -> std::optional<int64_t> {
    if (v.empty() || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }) || v.size() > 18)
      return std::nullopt;
    return std::stoll(v);
  };
  const bool redirect = status / 100 == 3;
  FileMetadata m;
  m.commit = get("x-repo-commit");
  m.etag = normalize_etag(!get("x-linked-etag").empty() ? get("x-linked-etag") : get("etag"));
  m.size = to_size(get("x-linked-size"));
  if (!m.size && !redirect) m.size = to_size(get("content-length"));
  m.location = redirect && !get("location").empty() ? get("location") : url;
  return m;
}

bool is_safe_repo_file(const std::string& name) {
  if (name.empty() || name.size() > 1024 || name.front() == '/') return false;
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7f || c == '\\') return false;
  std::stringstream ss(name);
  std::string part;
  size_t parts = 0;
  while (std::getline(ss, part, '/')) {
    if (part.empty() || part == "." || part == "..") return false;
    ++parts;
  }
  return parts > 0 && name.back() != '/';
}

bool is_safe_blob_name(const std::string& etag) {
  return !etag.empty() && etag.size() <= 128 &&
         std::all_of(etag.begin(), etag.end(), [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_'; });
}

CacheLayout::CacheLayout(fs::path cache_dir, const std::string& repo_id) : cache_(std::move(cache_dir)) {
  std::string folder = "models--" + repo_id;
  for (size_t p = folder.find('/'); p != std::string::npos; p = folder.find('/', p)) folder.replace(p, 1, "--");
  repo_ = cache_ / folder;
}

fs::path CacheLayout::blob(const std::string& etag) const { return repo_ / "blobs" / etag; }
fs::path CacheLayout::incomplete(const std::string& etag) const { return repo_ / "blobs" / (etag + ".incomplete"); }
fs::path CacheLayout::snapshot(const std::string& commit) const { return repo_ / "snapshots" / commit; }
fs::path CacheLayout::pointer(const std::string& commit, const std::string& file) const {
  return snapshot(commit) / fs::path(file);
}
fs::path CacheLayout::ref(const std::string& revision) const { return repo_ / "refs" / fs::path(revision); }
fs::path CacheLayout::lock(const std::string& etag) const {
  return cache_ / ".locks" / repo_.filename() / (etag + ".lock");
}

std::string CacheLayout::pointer_target(const std::string& file, const std::string& etag) {
  std::string up = "../../";
  for (char c : file)
    if (c == '/') up += "../";
  return up + "blobs/" + etag;
}

FilePlan plan_files(const std::string& repo_id, const std::vector<std::string>& siblings, Need need,
                    const std::string& gguf_file) {
  const std::set<std::string> have(siblings.begin(), siblings.end());
  FilePlan plan;
  auto add_if_present = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (have.count(n)) plan.files.push_back(n);
  };
  if (need != Need::tokenizer) add_if_present({"config.json", "generation_config.json"});
  add_if_present({"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"});
  if (need == Need::tokenizer && !have.count("tokenizer.json"))
    throw Error("repo " + quote(repo_id) + " has no tokenizer.json (--tokenizer needs one)");
  if (need == Need::config && !have.count("config.json"))
    throw Error("repo " + quote(repo_id) + " has no config.json (--hf-config-path needs one)");
  if (need != Need::model) return plan;

  std::vector<std::string> ggufs;
  for (const auto& s : siblings)
    if (ends_with(s, ".gguf") && is_safe_repo_file(s)) ggufs.push_back(s);
  auto gguf_list = [&] {
    std::string l;
    for (size_t i = 0; i < ggufs.size() && i < 20; ++i) l += (i ? ", " : "") + ggufs[i];
    return l.empty() ? std::string("none") : l;
  };
  if (!gguf_file.empty()) {
    if (!have.count(gguf_file))
      throw Error("repo " + quote(repo_id) + " has no file " + quote(gguf_file) + " (its .gguf files: " + gguf_list() + ")");
    plan.gguf = gguf_file;
  } else if (have.count("model.safetensors.index.json")) {
    plan.needs_index = true;
    plan.files.push_back("model.safetensors.index.json");
  } else if (have.count("model.safetensors")) {
    plan.files.push_back("model.safetensors");
  } else if (ggufs.size() == 1) {
    plan.gguf = ggufs[0];
  } else if (ggufs.size() > 1) {
    throw Error("repo " + quote(repo_id) + " holds " + std::to_string(ggufs.size()) + " .gguf files (" + gguf_list() +
                "); name the one to load as " + repo_id + ":FILE.gguf");
  } else {
    throw Error("repo " + quote(repo_id) +
                " has no weights striker can load (no model.safetensors, model.safetensors.index.json or .gguf file)");
  }
  if (!plan.gguf.empty()) plan.files.push_back(plan.gguf);
  return plan;
}

std::vector<std::string> index_shards(const std::string& index_json, const std::string& source) {
  JsonLimits limits;
  limits.max_array_items = 1 << 20;
  const nlohmann::json j = parse_json_strict(index_json, source, limits);
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    throw Error(source + ": no \"weight_map\" object");
  std::set<std::string> shards;
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string() || !is_safe_repo_file(file.get<std::string>()))
      throw Error(source + ": weight_map[" + quote(tensor) + "] is not a safe file name");
    shards.insert(file.get<std::string>());
  }
  if (shards.empty()) throw Error(source + ": weight_map is empty");
  return {shards.begin(), shards.end()};
}

}  // namespace striker::hub
