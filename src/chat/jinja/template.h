// A parsed Jinja template: parse once, render many times (thread-safe: renders share
// only the immutable syntax tree).
#pragma once
#include <memory>
#include <string>

#include "chat/jinja/ast.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/value.h"

namespace striker::jinja {

class Template {
 public:
  // Throws striker::Error "<origin>:<line>:<col>: ..." on a syntax error.
  static Template parse(const std::string& source, const std::string& origin);

  // `variables` must be a dict; its keys become the template's top-level names.
  std::string render(const Value& variables, const RenderLimits& limits = {}) const;
  std::string render_json(const nlohmann::ordered_json& variables, const RenderLimits& limits = {}) const;

 private:
  std::string origin_;
  std::shared_ptr<const Body> body_;
  std::vector<std::string> root_locals_;
};

}  // namespace striker::jinja
