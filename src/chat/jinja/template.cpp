#include "chat/jinja/template.h"

#include "chat/jinja/lexer.h"
#include "chat/jinja/parser.h"
#include "chat/jinja/scoping.h"
#include "chat/jinja/unicode.h"
#include "core/error.h"

namespace striker::jinja {

Template Template::parse(const std::string& source, const std::string& origin) {
  utf8_decode(source, (origin + ": template source").c_str());  // validates UTF-8
  std::string normalized = normalize_template_source(source);
  std::vector<Token> tokens = tokenize_template(normalized, origin);
  Template t;
  t.origin_ = origin;
  auto body = std::make_shared<Body>(parse_template(tokens, origin));
  t.root_locals_ = analyze_scoping(*body);
  t.body_ = std::move(body);
  return t;
}

std::string Template::render(const Value& variables, const RenderLimits& limits) const {
  if (!variables.is_dict()) throw Error(origin_ + ": template variables must be a JSON object");
  Renderer r(origin_, limits);
  return r.render(*body_, root_locals_, variables.as_dict());
}

std::string Template::render_json(const nlohmann::ordered_json& variables, const RenderLimits& limits) const {
  return render(Value::from_json(variables), limits);
}

}  // namespace striker::jinja
