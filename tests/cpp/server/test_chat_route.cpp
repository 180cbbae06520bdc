// The chat route end to end against a scripted engine whose output is GLM-4.7 markup: the glm47
// parser splits reasoning / content / tool calls, streaming and not, with vLLM's finish rules.
#include <httplib.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "glm47_chat_server.h"

namespace striker::server {
namespace {

using nlohmann::json;

const char* kScript =
    "Check the weather.</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
    "<arg_key>days</arg_key><arg_value>3</arg_value></tool_call>";

const json kTools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}])");

struct ChatFixture : testing::Glm47ChatServer {
  ChatFixture()
      : Glm47ChatServer(kScript, ChatTemplate::from_source("{% for m in messages %}{{ m.content }}{% endfor %}",
                                                           "test template"),
                        8) {}
  json chat(json body) {
    body["messages"] = {{{"role", "user"}, {"content", "weather?"}}};
    body["max_tokens"] = 500;
    auto r = client->Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    return r->body.empty() || body.value("stream", false) ? json(r->body) : json::parse(r->body);
  }
};

TEST_F(ChatFixture, NonStreamingSplitsReasoningAndTypedToolCall) {
  auto j = chat({{"tools", kTools}});
  const auto& choice = j["choices"][0];
  EXPECT_EQ(choice["message"]["reasoning"], "Check the weather.");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\": \"Paris\", \"days\": 3}");
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_EQ(choice["stop_reason"], 151338);
  // The parsers need special tokens in the text, so the server turned skipping off.
  EXPECT_FALSE(engine.received().at(0).params.skip_special_tokens);
}

TEST_F(ChatFixture, StreamingDeltasRebuildTheSameMessage) {
  auto body = chat({{"tools", kTools}, {"stream", true}, {"n", 2}}).get<std::string>();
  std::map<int, std::string> reasoning, args, names;
  std::map<int, int> finishes;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    const std::string data = body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") break;
    auto c = json::parse(data)["choices"][0];
    const int i = c["index"];
    const auto& d = c["delta"];
    if (d.contains("reasoning")) reasoning[i] += d["reasoning"].get<std::string>();
    for (const auto& tc : d.value("tool_calls", json::array())) {
      EXPECT_EQ(tc["index"], 0);
      if (tc.contains("id")) names[i] += tc["function"]["name"].get<std::string>();
      if (tc["function"].contains("arguments")) args[i] += tc["function"]["arguments"].get<std::string>();
    }
    if (!c["finish_reason"].is_null()) {
      ++finishes[i];
      EXPECT_EQ(c["finish_reason"], "tool_calls");
    }
  }
  // Choice 0 reads the script from the start; choice 1 from its second character.
  EXPECT_EQ(reasoning[0], "Check the weather.");
  EXPECT_EQ(reasoning[1], "heck the weather.");
  for (int i : {0, 1}) {
    EXPECT_EQ(names[i], "get_weather");
    EXPECT_EQ(args[i], "{\"city\": \"Paris\", \"days\": 3}");
    EXPECT_EQ(finishes[i], 1);
  }
}

TEST_F(ChatFixture, ToolChoiceNoneAndIncludeReasoningFalse) {
  auto none = chat({{"tools", kTools}, {"tool_choice", "none"}, {"include_reasoning", false}});
  const auto& msg = none["choices"][0]["message"];
  EXPECT_FALSE(msg.contains("tool_calls"));
  EXPECT_TRUE(msg["reasoning"].is_null());
  EXPECT_EQ(none["choices"][0]["finish_reason"], "stop");
  auto named = chat({{"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}});
  EXPECT_EQ(named["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(named["choices"][0]["message"]["content"], "");
}

TEST_F(ChatFixture, ToolChoiceValidationIs400) {
  for (const json& bad : {json{{"tool_choice", "required"}}, json{{"tools", json::array()}},
                          json{{"tools", kTools}, {"tool_choice", {{"type", "function"}, {"function", {{"name", "x"}}}}}}}) {
    json body = bad;
    body["messages"] = {{{"role", "user"}, {"content", "q"}}};
    auto r = client->Post("/v1/chat/completions", body.dump(), "application/json");
    EXPECT_EQ(r->status, 400) << body.dump();
    EXPECT_EQ(json::parse(r->body)["error"]["param"].get<std::string>().substr(0, 4), "tool");
  }
}

}  // namespace
}  // namespace striker::server
