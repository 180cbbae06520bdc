// continue_final_message through the chat route with the Flint (GLM-4.7) template and the glm47
// parsers: the engine sees the prompt cut after the final message's content, and what it
// generates is parsed as content (prompt past `</think>`) or reasoning (prompt in an open `<think>`).
#include <httplib.h>
#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "glm47_chat_server.h"

namespace striker::server {
namespace {

using nlohmann::json;

struct ContinueFixture : testing::Glm47ChatServer {
  ContinueFixture()
      : Glm47ChatServer(" ends here.</think>tail",
                        ChatTemplate::from_tokenizer_dir(std::filesystem::path(STRIKER_SHARED_DIR) /
                                                         "fixtures/flint-tokenizer"),
                        4) {}
  httplib::Result post(json body) {
    body["max_tokens"] = 100;
    return client->Post("/v1/chat/completions", body.dump(), "application/json");
  }
  std::string last_prompt() const {
    const std::vector<int32_t> p = engine.received().back().prompt;
    return std::string(p.begin(), p.end());  // ByteTokenizer: one token per byte
  }
};

const json kContinueFlags = {{"continue_final_message", true}, {"add_generation_prompt", false}};

json continue_body(const json& last) {
  json body = kContinueFlags;
  body["messages"] = json::array({{{"role", "user"}, {"content", "Q"}}, last});
  return body;
}

TEST_F(ContinueFixture, ContinuedContentIsParsedAsContent) {
  auto r = post(continue_body({{"role", "assistant"}, {"reasoning_content", "R"}, {"content", "The story"}}));
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(last_prompt(), "[gMASK]<sop><|user|>Q<|assistant|><think>R</think>The story");
  const auto msg = json::parse(r->body)["choices"][0]["message"];
  EXPECT_EQ(msg["content"], " ends here.tail");  // the stray `</think>` in content is swallowed
  EXPECT_TRUE(msg["reasoning"].is_null());
}

TEST_F(ContinueFixture, StreamedContinuationIsContentToo) {
  json body = continue_body({{"role", "assistant"}, {"content", "The story"}});
  body["stream"] = true;
  auto r = post(body);
  ASSERT_EQ(r->status, 200) << r->body;
  std::string content, reasoning;
  size_t pos = 0;
  while ((pos = r->body.find("data: ", pos)) != std::string::npos) {
    const size_t end = r->body.find("\n\n", pos);
    const std::string data = r->body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") break;
    const json d = json::parse(data)["choices"][0]["delta"];
    if (d.contains("content") && d["content"].is_string()) content += d["content"].get<std::string>();
    if (d.contains("reasoning") && d["reasoning"].is_string()) reasoning += d["reasoning"].get<std::string>();
  }
  EXPECT_EQ(content, " ends here.tail") << r->body;
  EXPECT_EQ(reasoning, "");
}

TEST_F(ContinueFixture, OpenThinkBlockIsContinuedAsReasoning) {
  auto r = post(continue_body({{"role", "assistant"}, {"content", "<think>Hmm,"}}));
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(last_prompt(), "[gMASK]<sop><|user|>Q<|assistant|></think><think>Hmm,");
  const auto msg = json::parse(r->body)["choices"][0]["message"];
  EXPECT_EQ(msg["reasoning"], " ends here.");
  EXPECT_EQ(msg["content"], "tail");
}

TEST_F(ContinueFixture, WithoutContinueTheGenerationPromptStillOpensReasoning) {
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "Q"}}})}};
  auto r = post(body);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(last_prompt(), "[gMASK]<sop><|user|>Q<|assistant|><think>");
  EXPECT_EQ(json::parse(r->body)["choices"][0]["message"]["reasoning"], " ends here.");
  // add_generation_prompt=false alone renders the conversation as it is.
  body = {{"add_generation_prompt", false},
          {"messages", json::array({{{"role", "user"}, {"content", "Q"}}, {{"role", "assistant"}, {"content", "A"}}})}};
  r = post(body);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(last_prompt(), "[gMASK]<sop><|user|>Q<|assistant|></think>A");
}

TEST_F(ContinueFixture, NullContentContinuesAfterTheWholeMessage) {
  // vLLM preprocesses null content to "", and Hugging Face's cut at rindex("") is the end of the
  // render: the prompt is the conversation as rendered, tool calls included.
  const json call = {{"id", "c"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}};
  json body = continue_body({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
  auto r = post(body);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::string continued = last_prompt();
  body.erase("continue_final_message");
  r = post(body);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(continued, last_prompt());
  EXPECT_NE(continued.find("<tool_call>f</tool_call>"), std::string::npos) << continued;
}

TEST_F(ContinueFixture, MisuseIs400NamingTheField) {
  const json assistant = {{"role", "assistant"}, {"content", "A"}};
  json both = continue_body(assistant);
  both["add_generation_prompt"] = true;
  json defaulted = continue_body(assistant);
  defaulted.erase("add_generation_prompt");  // add_generation_prompt defaults to true
  json user_last = kContinueFlags;
  user_last["messages"] = json::array({{{"role", "user"}, {"content", "Q"}}});
  json changed = continue_body({{"role", "assistant"}, {"content", "<think>\nR\n</think>\nA"}});
  for (const json& body : {both, defaulted, user_last, changed}) {
    auto r = post(body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body.dump();
    const auto err = json::parse(r->body)["error"];
    EXPECT_EQ(err["param"], "continue_final_message") << r->body;
    EXPECT_EQ(err["type"], "BadRequestError") << r->body;
    EXPECT_EQ(err["code"], 400) << r->body;
  }
}

}  // namespace
}  // namespace striker::server
