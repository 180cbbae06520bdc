// Turns one choice's generated text into OpenAI message fields (content / reasoning / tool_calls),
// both streaming (delta by delta) and for a finished text. The server holds one per choice.
// "plain" passes text through as content; glm47 reasoning/tool parsing plugs in behind the same
// interface (see make_choice_parser).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace striker::server {

struct ParsedDelta {
  std::string reasoning;
  std::string content;
  nlohmann::json tool_calls = nlohmann::json::array();  // OpenAI delta.tool_calls items (with index)
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

struct ParsedMessage {
  std::optional<std::string> content;
  std::optional<std::string> reasoning;
  nlohmann::json tool_calls = nlohmann::json::array();  // OpenAI message.tool_calls items
};

class ChoiceParser {
 public:
  virtual ~ChoiceParser() = default;
  virtual ParsedDelta feed(const std::string& text, const std::vector<int32_t>& tokens) = 0;
  virtual ParsedDelta finish() = 0;  // flushes held-back text at the end of the stream
  virtual ParsedMessage parse_complete(const std::string& text) = 0;
};

// What the request and the server flags say about parsing for one chat request.
struct ParserSettings {
  std::string reasoning_parser;  // "" or "glm47"
  std::string tool_parser;       // "" or "glm47" (only when --enable-auto-tool-choice)
  bool thinking_enabled = true;  // effective chat_template_kwargs
  // continue_final_message: the prompt ends after `</think>` (inside the continued message's
  // content), so output starts as content rather than reasoning.
  bool reasoning_ended_in_prompt = false;
  nlohmann::ordered_json tools;  // request tools (null when none), in the request's key order
  std::string tool_choice = "none";  // none | auto | required | named
  std::string named_tool;
};

// Parser names this build can serve (checked at startup so a bad flag fails fast).
bool reasoning_parser_available(const std::string& name);
bool tool_parser_available(const std::string& name);

std::unique_ptr<ChoiceParser> make_choice_parser(const ParserSettings& settings);

}  // namespace striker::server
