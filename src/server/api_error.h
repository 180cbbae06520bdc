// OpenAI-shaped errors: every rejected request becomes {"error": {message, type, param, code}}.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace striker::server {

// A user-facing request failure with its HTTP status. `param` names the offending field (may be empty).
class ApiError : public Error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = "")
      : Error(message), status_(status), type_(std::move(type)), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string type_;
  std::string param_;
};

inline ApiError bad_request(const std::string& message, const std::string& param = "") {
  return ApiError(400, "BadRequestError", message, param);
}
inline ApiError not_implemented(const std::string& message, const std::string& param = "") {
  return ApiError(501, "NotImplementedError", message, param);
}

// A draining server (SIGTERM) refuses new work with a 503 that a router retries on another replica.
inline ApiError draining_error() {
  return ApiError(503, "ServiceUnavailableError", "the server is shutting down and takes no new requests; retry on another replica");
}
// A request still running when the drain gives up (--shutdown-timeout, or a second signal).
inline ApiError shutdown_abort_error() {
  return ApiError(503, "ServiceUnavailableError",
                  "the server shut down before this request finished (--shutdown-timeout reached); retry it");
}

// The error body vLLM sends: code is the HTTP status as an integer, param null when unknown.
nlohmann::json error_body(int status, const std::string& type, const std::string& message,
                          const std::string& param = "");
inline nlohmann::json error_body(const ApiError& e) {
  return error_body(e.status(), e.type(), e.what(), e.param());
}

}  // namespace striker::server
