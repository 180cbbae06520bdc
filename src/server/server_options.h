// Everything `striker serve` decides once at startup and the HTTP layer reads per request.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/cors.h"
#include "server/metrics.h"
#include "server/sampling_request.h"

namespace striker::server {

struct ServerOptions {
  std::vector<std::string> served_model_names;  // the first is echoed in responses
  std::string model_root;                        // path the model came from (/v1/models "root")
  std::string api_key;                           // empty = no auth
  int64_t max_model_len = 0;
  SamplingDefaults sampling_defaults;
  RequestLimits limits;
  std::vector<int32_t> eos_token_ids;            // to tell a stop token id from a stop string
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;                  // "" or glm47
  std::string reasoning_parser;                  // "" or glm47
  bool exclude_tools_when_tool_choice_none = false;
  nlohmann::json default_chat_template_kwargs = nlohmann::json::object();
  size_t http_threads = 64;
  size_t max_body_bytes = size_t(32) << 20;
  bool log_requests = true;                      // one log line per request (--disable-log-requests)
  bool return_tokens_as_token_ids = false;       // vLLM's --return-tokens-as-token-ids: every request's default
  bool track_server_load = false;                // vLLM's --enable-server-load-tracking (GET /load)
  CorsPolicy cors;                               // --allowed-origins / -methods / -headers, --allow-credentials
  CacheConfigInfo cache;
};

}  // namespace striker::server
