// The few HTTP calls the Hub client makes, over libcurl: a HEAD that follows only relative
// redirects (a renamed repo) and stops at an absolute one (the CDN location of an LFS file,
// whose headers carry X-Linked-Etag / X-Linked-Size), a small GET for JSON, and a GET that
// appends a file's bytes from an offset (Range) to an open file.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "loaders/hub_repo.h"

namespace striker::hub {

struct HttpResult {
  long status = 0;         // 0 when no HTTP response came (see transport_error)
  Headers headers;         // of the last response
  std::string body;        // JSON calls, and the start of an error body
  std::string transport_error;  // libcurl's message when the transfer failed
  std::string url;         // the URL of the last request (after relative redirects)
};

class HttpClient {
 public:
  // `token` is sent as "Authorization: Bearer" to `endpoint`'s origin only, never to a CDN.
  HttpClient(std::string endpoint, std::string token, double metadata_timeout_s, double stall_timeout_s);

  HttpResult head(const std::string& url) const;
  HttpResult get_small(const std::string& url, size_t max_bytes) const;
  // Appends the body to `out`, asking for bytes from `offset` on (Range) when it is > 0; a
  // 200 answer to a Range request (the server ignored it) rewinds `out` to the start first.
  // `on_bytes(total bytes in the file)` is called as data arrives.
  HttpResult download(const std::string& url, int64_t offset, std::FILE* out,
                      const std::function<void(int64_t)>& on_bytes) const;

 private:
  std::string endpoint_origin_, token_;
  double metadata_timeout_s_, stall_timeout_s_;
};

// A one-line error for a failed Hub call, as huggingface_hub classifies them (X-Error-Code):
// the repo, revision or file not found, a gated repo, a missing or rejected token (naming
// where it came from: HF_TOKEN or the token file), or the transport failure. `file` is "" for
// the API call.
std::string describe_failure(const HttpResult& r, const HubSettings& settings, const std::string& repo_id,
                             const std::string& revision, const std::string& file);

}  // namespace striker::hub
