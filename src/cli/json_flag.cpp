#include "cli/json_flag.h"

#include "core/error.h"

namespace striker::cli {

nlohmann::json parse_json_object_flag(const std::string& flag, const std::string& text, const std::string& example) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(flag + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(flag + " must be a JSON object, e.g. '" + example + "'");
  return j;
}

}  // namespace striker::cli
