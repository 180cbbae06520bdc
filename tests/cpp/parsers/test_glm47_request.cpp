// Request JSON + server flags -> parser options (thinking, tools, tool_choice rules).
#include <gtest/gtest.h>

#include "chat/glm47_request.h"
#include "core/error.h"

namespace striker {
namespace {

using J = nlohmann::json;

const char* kTools = R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}])";

J request(const std::string& extra) { return J::parse("{\"messages\":[]" + extra + "}"); }

TEST(Glm47Request, ThinkingFromKwargsEffortAndDefaults) {
  Glm47ServerFlags flags;
  EXPECT_TRUE(glm47_options_from_request(request(""), flags).thinking);
  EXPECT_FALSE(glm47_options_from_request(request(R"(,"chat_template_kwargs":{"enable_thinking":false})"), flags).thinking);
  EXPECT_FALSE(glm47_options_from_request(request(R"(,"reasoning_effort":"none")"), flags).thinking);
  EXPECT_TRUE(glm47_options_from_request(request(R"(,"reasoning_effort":"high")"), flags).thinking);
  // The request's own enable_thinking wins over reasoning_effort.
  EXPECT_TRUE(glm47_options_from_request(
                  request(R"(,"reasoning_effort":"none","chat_template_kwargs":{"enable_thinking":true})"), flags)
                  .thinking);
  flags.default_chat_template_kwargs = {{"enable_thinking", false}};
  EXPECT_FALSE(glm47_options_from_request(request(""), flags).thinking);
  EXPECT_TRUE(glm47_options_from_request(request(R"(,"chat_template_kwargs":{"enable_thinking":true})"), flags).thinking);
  Glm47ServerFlags no_reasoning;
  no_reasoning.reasoning_parser = false;
  EXPECT_FALSE(glm47_options_from_request(request(""), no_reasoning).thinking);
  EXPECT_EQ(effective_chat_template_kwargs(request(R"(,"reasoning_effort":"low","chat_template_kwargs":{"x":1})"),
                                           J::parse(R"({"x":0,"y":2})")),
            J::parse(R"({"x":1,"y":2,"enable_thinking":true})"));
}

TEST(Glm47Request, ToolsAndChoice) {
  Glm47ServerFlags flags;
  auto o = glm47_options_from_request(request(std::string(",\"tools\":") + kTools), flags);
  EXPECT_EQ(o.tool_choice.kind, ToolChoiceKind::Auto);
  ASSERT_NE(o.tools.find("f"), nullptr);
  o = glm47_options_from_request(request(""), flags);
  EXPECT_EQ(o.tool_choice.kind, ToolChoiceKind::None);
  o = glm47_options_from_request(
      request(std::string(",\"tools\":") + kTools + R"(,"tool_choice":{"type":"function","function":{"name":"f"}},)"
              R"("parallel_tool_calls":false,"include_reasoning":false)"),
      flags);
  EXPECT_EQ(o.tool_choice.kind, ToolChoiceKind::Named);
  EXPECT_FALSE(o.parallel_tool_calls);
  EXPECT_FALSE(o.include_reasoning);
  EXPECT_THROW(glm47_options_from_request(request(R"(,"include_reasoning":"yes")"), flags), Error);
  EXPECT_THROW(glm47_options_from_request(request(R"(,"chat_template_kwargs":[1])"), flags), Error);
  Glm47ServerFlags no_auto;
  no_auto.auto_tool_choice = false;
  EXPECT_THROW(glm47_options_from_request(request(std::string(",\"tools\":") + kTools), no_auto), Error);
  EXPECT_NO_THROW(glm47_options_from_request(
      request(std::string(",\"tools\":") + kTools + R"(,"tool_choice":"required")"), no_auto));
  Glm47ServerFlags no_parser;
  no_parser.tool_parser = false;
  EXPECT_THROW(glm47_options_from_request(
                   request(std::string(",\"tools\":") + kTools + R"(,"tool_choice":"required")"), no_parser),
               Error);
  o = glm47_options_from_request(request(std::string(",\"tools\":") + kTools + R"(,"tool_choice":"none")"), no_parser);
  EXPECT_FALSE(o.tool_parser_enabled);
}

TEST(Glm47Request, OptionsDriveTheParser) {
  // End to end: a request that disables thinking and forces a named tool.
  const auto options = glm47_options_from_request(
      request(std::string(",\"tools\":") + kTools +
              R"(,"tool_choice":{"type":"function","function":{"name":"f"}},"chat_template_kwargs":{"enable_thinking":false})"),
      Glm47ServerFlags{});
  Glm47Parser parser(options);
  parser.feed("x</think><tool_call>f<arg_key>a</arg_key><arg_value>5</arg_value></tool_call>");
  parser.finish();
  const auto msg = parser.message();
  EXPECT_EQ(msg.content, std::optional<std::string>("x</think>"));
  ASSERT_EQ(msg.tool_calls.size(), 1u);
  EXPECT_EQ(msg.tool_calls[0].arguments, R"({"a": 5})");
  EXPECT_EQ(glm47_finish_reason("stop", parser.has_tool_calls(), options.tool_choice), "stop");
}

}  // namespace
}  // namespace striker
