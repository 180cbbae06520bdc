#include "server/choice_parser.h"

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

}  // namespace

bool reasoning_parser_available(const std::string&) { return false; }
bool tool_parser_available(const std::string&) { return false; }

std::unique_ptr<ChoiceParser> make_choice_parser(const ParserSettings& settings) {
  if (!settings.reasoning_parser.empty() || !settings.tool_parser.empty()) {
    throw Error("the glm47 parsers are not available in this build");
  }
  return std::make_unique<PlainParser>();
}

}  // namespace striker::server
