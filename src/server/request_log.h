// One log line per HTTP request, written by httplib's logger hook, which runs after the whole
// response has been sent (an SSE stream included), so a stream's line has its final token counts:
//   INFO 12-01 22:43:53.123 [http] 127.0.0.1:51234 "POST /v1/chat/completions" 200
//        chatcmpl-1a2b3c prompt_tokens=12 completion_tokens=40 latency=0.532s
// Generation routes name their request in the X-Request-Id response header and hand over the
// token counts under that id; other routes log "-" for them. Probes (/health, /ping, /metrics) are
// logged at debug level so an orchestrator's polling does not drown the request lines.
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace striker::server {

inline constexpr const char* kRequestIdHeader = "X-Request-Id";

// The routes orchestrators poll: public even with an API key, logged at debug level.
inline bool is_probe_path(const std::string& path) {
  return path == "/health" || path == "/ping" || path == "/metrics" || path == "/load";
}

class RequestLog {
 public:
  explicit RequestLog(bool enabled) : enabled_(enabled) {}
  bool enabled() const { return enabled_; }

  // Pre-routing: the request's start, for its latency.
  void begin(const httplib::Request& req);
  // A generation route's final counts, under the id it put in X-Request-Id.
  void note_usage(const std::string& request_id, int64_t prompt_tokens, int64_t completion_tokens);
  // After the response was sent: writes the line and forgets the request.
  void end(const httplib::Request& req, const httplib::Response& res);

  // The line itself (without the logger's level/time prefix); counts < 0 and latency < 0 print "-".
  static std::string format(const std::string& remote, const std::string& method, const std::string& path, int status,
                            const std::string& request_id, int64_t prompt_tokens, int64_t completion_tokens,
                            double latency_s);

 private:
  using Clock = std::chrono::steady_clock;
  struct Usage {
    int64_t prompt_tokens = -1;
    int64_t completion_tokens = -1;
  };
  // Entries whose response never reached end() (cannot happen with httplib, which always logs)
  // are dropped past this many, so the maps cannot grow without bound.
  static constexpr size_t kMaxPending = 100000;

  bool enabled_;
  std::mutex mu_;
  std::unordered_map<const httplib::Request*, Clock::time_point> started_;
  std::unordered_map<std::string, Usage> usage_;
};

}  // namespace striker::server
