#include "server/choice_parser.h"

#include "chat/glm47_parser.h"
#include "core/error.h"

namespace striker::server {
namespace {

// No reasoning or tool parser configured: every generated character is content.
class PlainParser : public ChoiceParser {
 public:
  ParsedDelta feed(const std::string& text, const std::vector<int32_t>&) override {
    ParsedDelta d;
    d.content = text;
    return d;
  }
  ParsedDelta finish() override { return {}; }
  ParsedMessage parse_complete(const std::string& text) override {
    ParsedMessage m;
    m.content = text;
    return m;
  }
};

// The glm47 reasoning + tool parser (src/chat/glm47_parser.h) behind the server's interface.
class Glm47ChoiceParser : public ChoiceParser {
 public:
  explicit Glm47ChoiceParser(Glm47ParserOptions options) : options_(options), stream_(std::move(options)) {}

  ParsedDelta feed(const std::string& text, const std::vector<int32_t>&) override { return convert(stream_.feed(text)); }
  ParsedDelta finish() override { return convert(stream_.finish()); }

  ParsedMessage parse_complete(const std::string& text) override {
    const Glm47Message msg = glm47_parse_complete(text, options_);
    ParsedMessage out;
    out.content = msg.content;
    out.reasoning = msg.reasoning;
    for (const auto& call : msg.tool_calls) {
      out.tool_calls.push_back({{"id", call.id},
                                {"type", "function"},
                                {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    }
    return out;
  }

 private:
  static ParsedDelta convert(const Glm47Delta& d) {
    ParsedDelta out;
    out.reasoning = d.reasoning;
    out.content = d.content;
    if (!d.tool_calls.empty()) {
      const auto json = glm47_delta_json(d);
      out.tool_calls = nlohmann::json::parse(json.at("tool_calls").dump());
    }
    return out;
  }

  Glm47ParserOptions options_;
  Glm47Parser stream_;
};

bool is_glm47(const std::string& name) { return name == "glm47" || name == "glm45"; }

}  // namespace

bool reasoning_parser_available(const std::string& name) { return is_glm47(name); }
bool tool_parser_available(const std::string& name) { return is_glm47(name); }

std::unique_ptr<ChoiceParser> make_choice_parser(const ParserSettings& s) {
  if (s.reasoning_parser.empty() && s.tool_parser.empty()) return std::make_unique<PlainParser>();
  if (!s.reasoning_parser.empty() && !is_glm47(s.reasoning_parser)) {
    throw Error("unknown reasoning parser '" + s.reasoning_parser + "'");
  }
  if (!s.tool_parser.empty() && !is_glm47(s.tool_parser)) throw Error("unknown tool parser '" + s.tool_parser + "'");
  Glm47ParserOptions o;
  // Without a reasoning parser the think markers are ordinary content (vLLM does no splitting).
  o.thinking = !s.reasoning_parser.empty() && s.thinking_enabled;
  o.reasoning_ended_in_prompt = s.reasoning_ended_in_prompt;
  o.include_reasoning = true;      // the route drops reasoning itself when include_reasoning=false
  o.parallel_tool_calls = true;    // likewise for parallel_tool_calls=false
  o.tool_parser_enabled = !s.tool_parser.empty();
  ToolChoice choice;
  if (s.tool_choice == "auto") choice.kind = ToolChoiceKind::Auto;
  else if (s.tool_choice == "required") choice.kind = ToolChoiceKind::Required;
  else if (s.tool_choice == "named") choice = {ToolChoiceKind::Named, s.named_tool};
  o.tool_choice = choice;
  o.tools = ToolSet::from_request(nlohmann::json(s.tools));  // typing looks keys up: order plays no part
  return std::make_unique<Glm47ChoiceParser>(std::move(o));
}

}  // namespace striker::server
