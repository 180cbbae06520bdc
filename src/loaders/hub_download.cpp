#include "loaders/hub_download.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "loaders/file_digest.h"
#include "loaders/hub_http.h"
#include "loaders/hub_progress.h"
#include "loaders/strict_json.h"

namespace striker::hub {

namespace {

constexpr int kAttemptsWithoutProgress = 5;  // huggingface_hub's http_get gives up after 5 too

// The Hub could not be used (no connection, no access, a server error): a cached snapshot may
// stand in. Not found and corrupt downloads are plain Errors: the cache cannot fix those.
class HubUnavailable : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void throw_failure(const HttpResult& r, const HubSettings& settings, const SnapshotRequest& request,
                                const std::string& file) {
  const std::string message = describe_failure(r, settings, request.spec.repo_id, request.revision, file);
  if (r.status == 0 || r.status == 401 || r.status == 403 || r.status >= 500) throw HubUnavailable(message);
  throw Error(message);
}

// An exclusive flock on .locks/models--org--name/<etag>.lock, the lock huggingface_hub takes
// (filelock uses flock on Linux), so a striker and a Python download never write one blob at once.
class BlobLock {
 public:
  explicit BlobLock(const fs::path& path) {
    fs::create_directories(path.parent_path());
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw Error(path.string() + ": cannot create the download lock file");
    if (::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      throw Error(path.string() + ": cannot take the download lock");
    }
  }
  ~BlobLock() { ::close(fd_); }  // closing releases the flock
  BlobLock(const BlobLock&) = delete;
  BlobLock& operator=(const BlobLock&) = delete;

 private:
  int fd_ = -1;
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  if (in) ss << in.rdbuf();
  return ss.str();
}

// Writes `text` to `path` through a temporary file and a rename, so readers never see half of it.
void write_atomically(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  const fs::path tmp = path.string() + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw Error(tmp.string() + ": cannot write");
  }
  fs::rename(tmp, path);
}

bool is_hex(const std::string& s, size_t n) {
  return s.size() == n && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// A revision name becomes a path under refs/: it must stay there.
void check_revision(const std::string& revision) {
  if (!is_safe_repo_file(revision)) throw Error("--revision " + quote(revision) + " is not a valid branch, tag or commit");
}

// Content check against the etag: SHA-256 for an LFS file (64 hex digits), the git blob SHA-1
// for a regular file (40); other etags (a non-Hub server) only get the size check.
void verify_blob(const fs::path& file, const std::string& etag, const std::optional<int64_t>& size,
                 const std::string& label) {
  const auto actual = int64_t(fs::file_size(file));
  std::string problem;
  if (size && actual != *size) {
    problem = "has " + std::to_string(actual) + " bytes but the Hub says " + std::to_string(*size);
  } else if (is_hex(etag, 64)) {
    if (auto got = sha256_file_hex(file); got != etag) problem = "has SHA-256 " + got + " but the Hub says " + etag;
  } else if (is_hex(etag, 40)) {
    if (auto got = git_blob_sha1_file_hex(file); got != etag) problem = "has git SHA-1 " + got + " but the Hub says " + etag;
  }
  if (problem.empty()) return;
  fs::remove(file);
  throw Error("download of " + label + " is corrupt: it " + problem + "; the partial file was removed, run again to retry");
}

class Downloader {
 public:
  Downloader(const HubSettings& s, const SnapshotRequest& r)
      : settings_(s),
        request_(r),
        layout_(s.cache_dir, r.spec.repo_id),
        http_(s.endpoint, s.token, s.etag_timeout_s, s.download_timeout_s) {}

  std::string run() {
    const auto [commit, siblings] = resolve_commit();
    FilePlan plan = plan_files(request_.spec.repo_id, siblings, request_.need, request_.spec.file);
    for (const auto& f : plan.files) fetch(commit, f);
    if (plan.needs_index) {
      const fs::path index = layout_.pointer(commit, "model.safetensors.index.json");
      for (const auto& shard : index_shards(read_text(index), index.string())) fetch(commit, shard);
    }
    if (request_.revision != commit) write_atomically(layout_.ref(request_.revision), commit);
    const fs::path snap = layout_.snapshot(commit);
    return plan.gguf.empty() ? snap.string() : (snap / plan.gguf).string();
  }

 private:
  std::string label(const std::string& file) const { return request_.spec.repo_id + " " + file; }

  // The commit the revision names now, and the repo's file list.
  std::pair<std::string, std::vector<std::string>> resolve_commit() {
    const std::string url = api_revision_url(settings_.endpoint, request_.spec.repo_id, request_.revision);
    const HttpResult r = http_.get_small(url, size_t(64) << 20);
    if (r.status != 200 || !r.transport_error.empty())
      throw_failure(r, settings_, request_, "");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(r.body);
    } catch (const std::exception& e) {
      throw Error(url + ": the answer is not JSON (is HF_ENDPOINT a Hugging Face Hub?): " + e.what());
    }
    if (!j.is_object() || !j.contains("sha") || !j["sha"].is_string() || !is_safe_blob_name(j["sha"].get<std::string>()))
      throw Error(url + ": the answer has no commit \"sha\" (is HF_ENDPOINT a Hugging Face Hub?)");
    std::vector<std::string> siblings;
    if (j.contains("siblings") && j["siblings"].is_array())
      for (const auto& s : j["siblings"])
        if (s.is_object() && s.contains("rfilename") && s["rfilename"].is_string())
          siblings.push_back(s["rfilename"].get<std::string>());
    return {j["sha"].get<std::string>(), siblings};
  }

  void fetch(const std::string& commit, const std::string& file) {
    if (!is_safe_repo_file(file)) throw Error("repo " + quote(request_.spec.repo_id) + " lists an unsafe file name " + quote(file));
    const fs::path pointer = layout_.pointer(commit, file);
    if (fs::exists(pointer)) return;  // a snapshot file never changes
    const std::string url = resolve_url(settings_.endpoint, request_.spec.repo_id, commit, file);
    const HttpResult head = http_.head(url);
    if (!head.transport_error.empty() || (head.status / 100 != 2 && head.status / 100 != 3))
      throw_failure(head, settings_, request_, file);
    const FileMetadata meta = file_metadata(head.headers, head.status, head.url);
    if (meta.commit.empty() || !is_safe_blob_name(meta.etag))
      throw Error(url + ": the answer has no X-Repo-Commit or no usable ETag, so HF_ENDPOINT (" + settings_.endpoint +
                  ") does not look like a Hugging Face Hub");
    const fs::path blob = layout_.blob(meta.etag);
    fs::create_directories(blob.parent_path());
    fs::create_directories(pointer.parent_path());
    {
      BlobLock lock(layout_.lock(meta.etag));
      if (!fs::exists(blob)) download_blob(meta, blob, file);
    }
    link_pointer(pointer, CacheLayout::pointer_target(file, meta.etag));
  }

  void download_blob(const FileMetadata& meta, const fs::path& blob, const std::string& file) {
    const fs::path part = layout_.incomplete(meta.etag);
    int64_t have = fs::exists(part) ? int64_t(fs::file_size(part)) : 0;
    if (meta.size && have > *meta.size) {  // longer than the file: it cannot be a prefix of it
      fs::remove(part);
      have = 0;
    }
    DownloadProgress progress;
    progress.begin(label(file), meta.size.value_or(0), have);
    int failures = 0;
    std::string last_error;
    while (!(meta.size && have == *meta.size)) {
      std::FILE* out = std::fopen(part.c_str(), "ab");
      if (!out) throw Error(part.string() + ": cannot open for writing");
      const HttpResult r = http_.download(meta.location, have, out, [&](int64_t n) { progress.update(n); });
      std::fclose(out);
      const int64_t now = int64_t(fs::file_size(part));
      const bool retryable = r.status == 0 || r.status == 408 || r.status == 429 || r.status >= 500 ||
                             (r.status / 100 == 2 && !r.transport_error.empty());
      if (r.transport_error.empty() && r.status / 100 == 2) {
        have = now;
        break;  // the server sent the whole body; verify_blob judges its size
      }
      if (r.status == 416) {  // nothing past `have`: what we hold is all the server has
        have = now;
        break;
      }
      if (!retryable) {
        progress.end(false);
        throw_failure(r, settings_, request_, file);
      }
      last_error = r.status == 0 || !r.transport_error.empty() ? r.transport_error : "HTTP " + std::to_string(r.status);
      failures = now > have ? 0 : failures + 1;  // any progress earns a fresh set of attempts
      have = now;
      if (failures >= kAttemptsWithoutProgress) {
        progress.end(false);
        throw Error("download of " + label(file) + " failed " + std::to_string(failures) + " times in a row (" +
                    last_error + "); " + std::to_string(have) + " bytes are kept in " + part.string() +
                    ": run the command again to resume");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100 << std::min(failures, 4)));
    }
    progress.update(have);
    try {
      verify_blob(part, meta.etag, meta.size, label(file));
    } catch (...) {
      progress.end(false);
      throw;
    }
    fs::rename(part, blob);
    progress.end(true);
  }

  static void link_pointer(const fs::path& pointer, const std::string& target) {
    std::error_code ec;
    if (fs::is_symlink(pointer, ec)) fs::remove(pointer, ec);  // a dangling link from a removed blob
    fs::create_symlink(target, pointer, ec);
    if (ec && !fs::exists(pointer))
      throw Error(pointer.string() + ": cannot create the snapshot link (" + ec.message() + ")");
  }

  const HubSettings& settings_;
  const SnapshotRequest& request_;
  CacheLayout layout_;
  HttpClient http_;
};

}  // namespace

std::optional<std::string> cached_snapshot(const HubSettings& settings, const SnapshotRequest& request,
                                           std::string& why) {
  check_revision(request.revision);
  const CacheLayout layout(settings.cache_dir, request.spec.repo_id);
  std::string commit = request.revision;
  if (!is_commit_hash(commit)) {
    const fs::path ref = layout.ref(request.revision);
    if (!fs::exists(ref)) {
      why = "no " + ref.string();
      return std::nullopt;
    }
    commit = read_text(ref);
    while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back()))) commit.pop_back();
    // Letters and digits only, so the ref cannot lead out of snapshots/.
    if (commit.empty() || commit.size() > 128 ||
        commit.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") != std::string::npos) {
      why = ref.string() + " does not hold a commit hash";
      return std::nullopt;
    }
  }
  const fs::path snapshot = layout.snapshot(commit);
  std::error_code ec;
  if (!fs::is_directory(snapshot, ec)) {
    why = "no snapshot folder " + snapshot.string();
    return std::nullopt;
  }
  if (request.spec.file.empty() || request.need != Need::model) return snapshot.string();
  const fs::path file = snapshot / request.spec.file;
  if (!fs::exists(file)) {
    why = "no " + file.string();
    return std::nullopt;
  }
  return file.string();
}

std::string download_snapshot(const HubSettings& settings, const SnapshotRequest& request) {
  check_revision(request.revision);
  try {
    return Downloader(settings, request).run();
  } catch (const HubUnavailable& e) {
    // Like huggingface_hub: when the Hub cannot be used, a cached snapshot of the revision still serves.
    std::string why;
    if (auto cached = cached_snapshot(settings, request, why)) {
      std::fprintf(stderr, "striker: warning: %s; using the cached snapshot %s\n", e.what(), cached->c_str());
      return *cached;
    }
    throw;
  }
}

}  // namespace striker::hub
