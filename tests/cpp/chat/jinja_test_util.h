// Helpers for the Jinja interpreter tests.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja/template.h"

namespace striker::jinja::testing {

// Renders `source` with HF settings and `vars` (a JSON object given as text).
inline std::string render(const std::string& source, const std::string& vars = "{}") {
  return Template::parse(source, "t").render_json(nlohmann::ordered_json::parse(vars));
}

}  // namespace striker::jinja::testing
