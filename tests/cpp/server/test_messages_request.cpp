// Anthropic Messages requests as chat requests (messages_request.h), without HTTP.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/messages_request.h"

namespace striker::server {
namespace {

using ojson = nlohmann::ordered_json;

RequestBody body(const char* text) {
  RequestBody b;
  b.ordered = ojson::parse(text);
  b.fields = b.ordered;
  return b;
}

TEST(MessagesRequest, BlocksBecomeChatMessages) {
  const auto r = messages_to_chat(body(R"({
    "model": "m", "max_tokens": 9, "system": [{"type": "text", "text": "sys"}],
    "messages": [
      {"role": "user", "content": "q"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                        {"type": "redacted_thinking", "data": "x"},
                                        {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "r"}]},
                                   {"type": "text", "text": "and?"}]}
    ],
    "tools": [{"name": "f", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
    "thinking": {"type": "disabled"}, "stop_sequences": ["x"], "top_k": 3, "stream": true})"));
  const ojson& m = r.chat.ordered["messages"];
  ASSERT_EQ(m.size(), 5u) << m.dump();
  EXPECT_EQ(m[0], ojson({{"role", "system"}, {"content", "sys"}}));
  EXPECT_EQ(m[2]["reasoning_content"], "hmm");
  EXPECT_TRUE(m[2]["content"].is_null());
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
  EXPECT_EQ(m[3], ojson({{"role", "tool"}, {"tool_call_id", "t1"}, {"content", "r"}}));  // before the turn's text
  EXPECT_EQ(m[4]["role"], "user");
  EXPECT_EQ(r.chat.ordered["tools"][0]["function"]["parameters"], ojson({{"type", "object"}}));
  EXPECT_EQ(r.chat.ordered["tool_choice"], "required");
  EXPECT_EQ(r.chat.ordered["parallel_tool_calls"], false);
  EXPECT_EQ(r.chat.ordered["chat_template_kwargs"]["enable_thinking"], false);
  EXPECT_EQ(r.chat.ordered["stop"], ojson::array({"x"}));
  EXPECT_EQ(r.chat.ordered["max_tokens"], 9);
  EXPECT_EQ(r.chat.ordered["top_k"], 3);
  EXPECT_TRUE(r.stream);
}

TEST(MessagesRequest, RefusalsNameTheField) {
  const std::pair<const char*, std::string> cases[] = {
      {R"({"messages": [{"role": "user", "content": "q"}]})", "max_tokens"},
      {R"({"max_tokens": -2, "messages": [{"role": "user", "content": "q"}]})", "max_tokens"},
      {R"({"max_tokens": 2, "messages": [{"role": "user", "content": [{"type": "document"}]}]})", "messages"},
      {R"({"max_tokens": 2, "system": [{"type": "image"}], "messages": [{"role": "user", "content": "q"}]})", "system"},
      {R"({"max_tokens": 2, "messages": [{"role": "user", "content": "q"}], "tools": [{"name": "f"}]})", "tools"},
      {R"({"max_tokens": 2, "messages": [{"role": "user", "content": "q"}], "stream": 1})", "stream"},
  };
  for (const auto& [text, param] : cases) {
    try {
      messages_to_chat(body(text));
      ADD_FAILURE() << "accepted " << text;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), param) << text << ": " << e.what();
    }
  }
  EXPECT_EQ(anthropic_error_body(404, "x")["error"]["type"], "not_found_error");
  EXPECT_EQ(anthropic_error_body(400, "x")["type"], "error");
}

}  // namespace
}  // namespace striker::server
