#include "loaders/hub_http.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <memory>

#include "loaders/strict_json.h"

namespace striker::hub {

namespace {

// libcurl must be initialised once per process before any handle is made; a function-local
// static does that thread-safely on first use.
void ensure_curl_initialised() {
  static const bool ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  (void)ok;
}

struct Transfer {
  HttpResult result;
  size_t max_body = 0;
  // download(): where the bytes go
  std::FILE* out = nullptr;
  int64_t offset = 0;
  int64_t in_file = 0;
  bool decided = false;
  std::string write_error;
  const std::function<void(int64_t)>* on_bytes = nullptr;
  CURL* curl = nullptr;
};

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string line(data, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  add_header_line(line, t->result.headers);
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (!t->out || status / 100 != 2) {  // a JSON body, or an error body: keep its start only
    const size_t room = t->max_body > t->result.body.size() ? t->max_body - t->result.body.size() : 0;
    if (t->out) {
      t->result.body.append(data, std::min(room, bytes));
      return bytes;
    }
    if (bytes > room) return 0;  // over the limit: abort the transfer
    t->result.body.append(data, bytes);
    return bytes;
  }
  if (!t->decided) {
    t->decided = true;
    t->in_file = t->offset;
    if (t->offset > 0 && status == 200) {  // the server ignored Range: start the file over
      std::fflush(t->out);
      if (ftruncate(fileno(t->out), 0) != 0) {
        t->write_error = std::strerror(errno);
        return 0;
      }
      t->in_file = 0;
    }
  }
  if (std::fwrite(data, 1, bytes, t->out) != bytes) {
    t->write_error = std::strerror(errno);
    return 0;
  }
  t->in_file += int64_t(bytes);
  if (t->on_bytes && *t->on_bytes) (*t->on_bytes)(t->in_file);
  return bytes;
}

using CurlPtr = std::unique_ptr<CURL, decltype(&curl_easy_cleanup)>;
using SlistPtr = std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)>;

}  // namespace

HttpClient::HttpClient(std::string endpoint, std::string token, double metadata_timeout_s, double stall_timeout_s)
    : endpoint_origin_(url_origin(endpoint)),
      token_(std::move(token)),
      metadata_timeout_s_(metadata_timeout_s),
      stall_timeout_s_(stall_timeout_s) {
  ensure_curl_initialised();
}

namespace {

enum class Kind { head, small_get, download };

HttpResult perform(Kind kind, const std::string& url, const std::string& endpoint_origin, const std::string& token,
                   double metadata_timeout_s, double stall_timeout_s, Transfer& t) {
  CurlPtr curl(curl_easy_init(), &curl_easy_cleanup);
  t.result = HttpResult{};
  t.result.url = url;
  if (!curl) {
    t.result.transport_error = "libcurl could not make a handle";
    return t.result;
  }
  t.curl = curl.get();
  SlistPtr headers(nullptr, &curl_slist_free_all);
  auto add = [&](const std::string& h) { headers.reset(curl_slist_append(headers.release(), h.c_str())); };
  // The token goes to the Hub only: a CDN location gets a signed URL instead.
  if (!token.empty() && url_origin(url) == endpoint_origin) add("Authorization: Bearer " + token);
  add("Accept-Encoding: identity");  // sizes must be the file's, not a compressed body's
  if (kind == Kind::download && t.offset > 0) add("Range: bytes=" + std::to_string(t.offset) + "-");

  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_USERAGENT, "striker (huggingface_hub-compatible)");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, long(metadata_timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  if (kind == Kind::head) {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, long(metadata_timeout_s * 1000));
  } else {
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    // A transfer that moves no byte for the stall timeout fails (and is resumed by the caller).
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, long(std::ceil(kind == Kind::download ? stall_timeout_s : metadata_timeout_s)));
  }
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  const CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &t.result.status);
  if (rc != CURLE_OK) {
    t.result.transport_error = !t.write_error.empty()       ? "writing the file failed: " + t.write_error
                               : rc == CURLE_WRITE_ERROR    ? "the response is larger than expected"
                               : errbuf[0]                  ? std::string(errbuf)
                                                            : std::string(curl_easy_strerror(rc));
  }
  return t.result;
}

}  // namespace

HttpResult HttpClient::head(const std::string& url) const {
  Transfer t;
  std::string current = url;
  // Relative redirects stay on the Hub (a renamed or moved repo): follow them. An absolute one
  // points at the file's storage: its headers are the metadata, so stop there.
  for (int hop = 0; hop < 10; ++hop) {
    HttpResult r = perform(Kind::head, current, endpoint_origin_, token_, metadata_timeout_s_, stall_timeout_s_, t);
    auto loc = r.headers.find("location");
    if (r.status / 100 != 3 || loc == r.headers.end() || loc->second.empty() || loc->second[0] != '/') return r;
    current = url_origin(current) + loc->second;
  }
  HttpResult r;
  r.url = current;
  r.transport_error = "too many redirects";
  return r;
}

HttpResult HttpClient::get_small(const std::string& url, size_t max_bytes) const {
  Transfer t;
  t.max_body = max_bytes;
  return perform(Kind::small_get, url, endpoint_origin_, token_, metadata_timeout_s_, stall_timeout_s_, t);
}

HttpResult HttpClient::download(const std::string& url, int64_t offset, std::FILE* out,
                                const std::function<void(int64_t)>& on_bytes) const {
  Transfer t;
  t.max_body = 4096;
  t.out = out;
  t.offset = offset;
  t.on_bytes = &on_bytes;
  HttpResult r = perform(Kind::download, url, endpoint_origin_, token_, metadata_timeout_s_, stall_timeout_s_, t);
  std::fflush(out);
  return r;
}

}  // namespace striker::hub

namespace striker::hub {

std::string describe_failure(const HttpResult& r, const HubSettings& settings, const std::string& repo_id,
                             const std::string& revision, const std::string& file) {
  const std::string repo = "repo " + quote(repo_id);
  const std::string what = file.empty() ? repo : "file " + quote(file) + " of " + repo;
  if (r.status == 0)
    return "cannot reach the Hugging Face Hub at " + settings.endpoint + " for " + what + " (" + r.transport_error +
           "); check the network or HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use the cache only";
  auto header = [&](const char* name) {
    auto it = r.headers.find(name);
    return it == r.headers.end() ? std::string() : it->second;
  };
  const std::string code = header("x-error-code");
  std::string detail = " (HTTP " + std::to_string(r.status) + (code.empty() ? "" : " " + code);
  if (auto msg = header("x-error-message"); !msg.empty()) detail += ": " + quote(msg, 200);
  detail += ", " + r.url + ")";
  const std::string token_hint =
      settings.token.empty()
          ? "no token was sent: set HF_TOKEN to a token that can read it"
          : "the token from " + settings.token_source + " was sent: check that HF_TOKEN holds a valid token with access to it";
  if (code == "RevisionNotFound") return "revision " + quote(revision) + " of " + repo + " not found" + detail;
  if (code == "EntryNotFound") return what + " not found at revision " + quote(revision) + detail;
  if (code == "GatedRepo")
    return repo + " is gated: accept its conditions at " + settings.endpoint + "/" + repo_id +
           " and set HF_TOKEN to a token of that account" + detail;
  if (r.status == 401)
    return repo + " was not found or needs authentication; " + token_hint + detail;
  if (r.status == 403) return "access to " + what + " was refused; " + token_hint + detail;
  if (r.status == 404)
    return (code == "RepoNotFound" || file.empty() ? repo + " not found" : what + " not found") + " at " +
           settings.endpoint + detail;
  std::string body = r.body.substr(0, 200);
  return "the Hugging Face Hub answered an error for " + what + detail + (body.empty() ? "" : ": " + quote(body));
}

}  // namespace striker::hub
