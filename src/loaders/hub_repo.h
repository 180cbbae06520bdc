// The pure parts of talking to the Hugging Face Hub, as huggingface_hub does it: repo ids,
// settings from the environment, endpoint URLs, response headers, the cache layout
// (models--org--name/{blobs,snapshots,refs}) and which files of a repo a model needs.
// No I/O except reading environment variables and the token file; tested in
// tests/cpp/loaders/test_hub_repo.cpp.
#pragma once
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace striker::hub {

namespace fs = std::filesystem;

// What the user typed as a model / tokenizer / config source: "org/name" or
// "org/name:file.gguf" (one GGUF file of a repo that holds several).
struct RepoSpec {
  std::string repo_id;  // org/name
  std::string file;     // "" or the .gguf file named after ':'
};

// nullopt when `s` is not a repo id (then it is meant as a local path).
std::optional<RepoSpec> parse_repo_spec(const std::string& s);

// Settings huggingface_hub reads from the environment, with its defaults and precedence.
struct HubSettings {
  std::string endpoint = "https://huggingface.co";  // HF_ENDPOINT, no trailing '/'
  fs::path cache_dir;                               // --download-dir, else HF_HUB_CACHE, HF_HOME/hub, ...
  std::string cache_chosen_by;                      // which of those chose it (for error messages)
  bool offline = false;                             // HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE)
  std::string token;                                // HF_TOKEN, else the token file
  std::string token_source;                         // "HF_TOKEN", the token file's path, or ""
  double etag_timeout_s = 10;                       // HF_HUB_ETAG_TIMEOUT: HEAD and API calls
  double download_timeout_s = 10;                   // HF_HUB_DOWNLOAD_TIMEOUT: a stalled transfer
};

// `download_dir` is --download-dir (vLLM's flag: the cache folder to use), "" for the default.
HubSettings settings_from_env(const std::string& download_dir = "");

// A 40-character lowercase hex git commit hash (a revision that needs no lookup).
bool is_commit_hash(const std::string& s);

// Percent-encoding as Python's urllib.parse.quote: letters, digits and "_.-~" stay, and so do
// the characters in `safe`.
std::string url_quote(const std::string& s, const std::string& safe = "/");

// GET {endpoint}/api/models/{repo}/revision/{revision}: the commit sha and the file list.
std::string api_revision_url(const std::string& endpoint, const std::string& repo_id, const std::string& revision);
// HEAD/GET {endpoint}/{repo}/resolve/{revision}/{file}.
std::string resolve_url(const std::string& endpoint, const std::string& repo_id, const std::string& revision,
                        const std::string& file);

// "scheme://host[:port]" of a URL, lowercased; "" when it is not absolute.
std::string url_origin(const std::string& url);

// ETag header value without a weak marker or quotes: W/"abc" -> abc.
std::string normalize_etag(const std::string& value);

// Response headers by lowercase name. A status line ("HTTP/...") starts a new response (after
// a redirect), so the map holds the last response's headers only.
using Headers = std::map<std::string, std::string>;
void add_header_line(const std::string& line, Headers& headers);

// What one HEAD of /resolve/ says about a file: the blob name (X-Linked-Etag, else ETag), the
// size (X-Linked-Size, else Content-Length of a non-redirect), the commit, and where to GET it
// (Location of a redirect, else the URL itself).
struct FileMetadata {
  std::string etag;
  std::optional<int64_t> size;
  std::string commit;
  std::string location;
};
FileMetadata file_metadata(const Headers& headers, long status, const std::string& url);

// A file name from the Hub (siblings, an index's weight_map) that is safe to join under a
// snapshot folder: relative, no empty, "." or ".." parts, no backslash or control bytes.
bool is_safe_repo_file(const std::string& name);
// An etag usable as a blob file name: letters, digits, '-', '_' only.
bool is_safe_blob_name(const std::string& etag);

// Where huggingface_hub keeps one repo in its cache.
class CacheLayout {
 public:
  CacheLayout(fs::path cache_dir, const std::string& repo_id);
  const fs::path& cache_dir() const { return cache_; }
  const fs::path& repo_dir() const { return repo_; }  // <cache>/models--org--name
  fs::path blob(const std::string& etag) const;        // blobs/<etag>
  fs::path incomplete(const std::string& etag) const;  // blobs/<etag>.incomplete
  fs::path snapshot(const std::string& commit) const;  // snapshots/<commit>
  fs::path pointer(const std::string& commit, const std::string& file) const;
  fs::path ref(const std::string& revision) const;     // refs/<revision>
  fs::path lock(const std::string& etag) const;        // <cache>/.locks/models--org--name/<etag>.lock
  // The relative symlink target from pointer(commit, file) to blob(etag): ../../blobs/<etag>,
  // one more "../" per folder in `file`.
  static std::string pointer_target(const std::string& file, const std::string& etag);

 private:
  fs::path cache_, repo_;
};

// Which files of a repo a caller needs.
enum class Need {
  model,          // config, tokenizer, generation config, and the weights
  model_no_weights,  // the same without weights (--load-format dummy)
  tokenizer,      // tokenizer files only (--tokenizer)
  config,         // config.json, generation config and tokenizer files (--hf-config-path; a GGUF
                  // model's tokenizer may come from there too)
};

// The files to fetch from a repo listing `siblings`, in order; the shards of a sharded
// checkpoint are added by the caller once the index is read (`needs_index` tells it to).
// Throws striker::Error naming the repo when the weights cannot be chosen.
struct FilePlan {
  std::vector<std::string> files;
  bool needs_index = false;         // model.safetensors.index.json is in `files`
  std::string gguf;                 // the .gguf file among `files`, if any
};
FilePlan plan_files(const std::string& repo_id, const std::vector<std::string>& siblings, Need need,
                    const std::string& gguf_file);

// The shard files listed in a model.safetensors.index.json (sorted, unique); throws
// striker::Error for a malformed index or an unsafe file name.
std::vector<std::string> index_shards(const std::string& index_json, const std::string& source);

}  // namespace striker::hub
