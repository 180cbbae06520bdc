#include "server/request_log.h"

#include "core/log.h"

#include <httplib.h>

namespace striker::server {
namespace {

std::string count_or_dash(int64_t v) { return v < 0 ? "-" : std::to_string(v); }

// The path and method come from the client: control characters are escaped so that a request
// cannot forge log lines.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') out += fmt::format("\\x{:02x}", c);
    else out += char(c);
  }
  return out;
}

}  // namespace

void RequestLog::begin(const httplib::Request& req) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (started_.size() >= kMaxPending) started_.clear();
  started_[&req] = Clock::now();
}

void RequestLog::note_usage(const std::string& request_id, int64_t prompt_tokens, int64_t completion_tokens) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (usage_.size() >= kMaxPending) usage_.clear();
  usage_[request_id] = Usage{prompt_tokens, completion_tokens};
}

void RequestLog::end(const httplib::Request& req, const httplib::Response& res) {
  if (!enabled_) return;
  const std::string id = res.get_header_value(kRequestIdHeader);
  double latency = -1;
  Usage usage;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = started_.find(&req); it != started_.end()) {
      latency = std::chrono::duration<double>(Clock::now() - it->second).count();
      started_.erase(it);
    }
    if (auto it = usage_.find(id); !id.empty() && it != usage_.end()) {
      usage = it->second;
      usage_.erase(it);
    }
  }
  const bool probe = is_probe_path(req.path);
  static const auto log = logging::get("http");
  log->log(probe ? spdlog::level::debug : spdlog::level::info,
           format(req.remote_addr + ":" + std::to_string(req.remote_port), req.method, req.path, res.status, id,
                  usage.prompt_tokens, usage.completion_tokens, latency));
}

std::string RequestLog::format(const std::string& remote, const std::string& method, const std::string& path,
                               int status, const std::string& request_id, int64_t prompt_tokens,
                               int64_t completion_tokens, double latency_s) {
  return fmt::format("{} \"{} {}\" {} {} prompt_tokens={} completion_tokens={} latency={}", remote, printable(method), printable(path),
                     status, request_id.empty() ? "-" : request_id, count_or_dash(prompt_tokens),
                     count_or_dash(completion_tokens), latency_s < 0 ? "-" : fmt::format("{:.3f}s", latency_s));
}

}  // namespace striker::server
