#include "server/api_error.h"

namespace striker::server {

nlohmann::json error_body(int status, const std::string& type, const std::string& message,
                          const std::string& param) {
  nlohmann::json err = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}};
  if (!param.empty()) err["param"] = param;
  return {{"error", err}};
}

}  // namespace striker::server
