// The Responses API's pieces without HTTP: input items -> chat messages, output items -> the history a
// later previous_response_id renders, and the bounded response store.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/response_store.h"
#include "server/responses_request.h"

namespace striker::server {
namespace {

using ojson = nlohmann::ordered_json;

RequestBody body(ojson j) {
  RequestBody b;
  b.ordered = std::move(j);
  b.fields = b.ordered;
  return b;
}

TEST(ResponsesRequest, InputItemsBecomeChatMessagesInOrder) {
  const ojson input = ojson::parse(R"([
    {"role": "developer", "content": "be brief"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "sum"}],
     "content": [{"type": "reasoning_text", "text": "think"}]},
    {"type": "function_call", "call_id": "c1", "name": "get", "arguments": "{\"a\": 1}"},
    {"type": "function_call", "call_id": "c2", "name": "get", "arguments": "{\"a\": 2}"},
    {"type": "function_call_output", "call_id": "c1", "output": "one"},
    {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "two"}]},
    {"role": "assistant", "content": [{"type": "output_text", "text": "done"}]}
  ])");
  const auto r = responses_to_chat(body({{"model", "m"}, {"instructions", "sys"}, {"input", input},
                                         {"max_output_tokens", 9}, {"reasoning", {{"effort", "none"}}},
                                         {"tools", ojson::parse(R"([{"type":"function","name":"get","parameters":{}}])")},
                                         {"tool_choice", {{"type", "function"}, {"name", "get"}}}}),
                                   nullptr);
  const ojson& m = r.chat.ordered["messages"];
  ASSERT_EQ(m.size(), 7u) << m.dump();
  EXPECT_EQ(m[0], ojson({{"role", "system"}, {"content", "sys"}}));
  EXPECT_EQ(m[1], ojson({{"role", "system"}, {"content", "be brief"}}));
  EXPECT_EQ(m[2]["content"], ojson::parse(R"([{"type":"text","text":"weather?"}])"));
  EXPECT_EQ(m[3]["role"], "assistant");
  EXPECT_EQ(m[3]["reasoning_content"], "think");  // content wins over the summary
  ASSERT_EQ(m[3]["tool_calls"].size(), 2u);
  EXPECT_EQ(m[3]["tool_calls"][1]["id"], "c2");
  EXPECT_EQ(m[3]["tool_calls"][1]["function"]["arguments"], "{\"a\": 2}");
  EXPECT_EQ(m[4], ojson({{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "one"}}));
  EXPECT_EQ(m[5]["content"], "two");
  EXPECT_EQ(m[6]["role"], "assistant");
  // The instructions are not part of the stored conversation (OpenAI does not carry them over).
  EXPECT_EQ(r.conversation.size(), 6u);
  EXPECT_EQ(r.chat.ordered["max_tokens"], 9);
  EXPECT_EQ(r.chat.ordered["reasoning_effort"], "none");
  EXPECT_EQ(r.chat.ordered["tools"][0]["function"]["name"], "get");
  EXPECT_EQ(r.chat.ordered["tool_choice"]["function"]["name"], "get");
  EXPECT_TRUE(r.store);
  EXPECT_FALSE(r.stream);
}

TEST(ResponsesRequest, PreviousConversationThenOutputThenNewInput) {
  ojson conversation = ojson::array({{{"role", "user"}, {"content", "q"}}});
  const ojson output = ojson::parse(R"([
    {"type": "reasoning", "id": "rs", "summary": [], "content": [{"type": "reasoning_text", "text": "r"}]},
    {"type": "message", "id": "m", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "a", "annotations": []}, {"type": "output_text", "text": "b"}]},
    {"type": "function_call", "id": "fc", "call_id": "c", "name": "f", "arguments": "{}", "status": "completed"}
  ])");
  append_output_as_messages(output, conversation);
  ASSERT_EQ(conversation.size(), 2u) << conversation.dump();
  EXPECT_EQ(conversation[1]["reasoning_content"], "r");
  EXPECT_EQ(conversation[1]["content"], "ab");
  EXPECT_EQ(conversation[1]["tool_calls"][0]["id"], "c");
  const auto r = responses_to_chat(
      body({{"input", ojson::parse(R"([{"type":"function_call_output","call_id":"c","output":"x"}])")}}), &conversation);
  ASSERT_EQ(r.chat.ordered["messages"].size(), 3u);
  EXPECT_EQ(r.chat.ordered["messages"][2]["role"], "tool");
  EXPECT_EQ(r.conversation.size(), 3u);
}

TEST(ResponsesRequest, UnsupportedOrMalformedFieldsName) {
  const std::pair<ojson, std::string> cases[] = {
      {{{"input", "x"}, {"tools", ojson::parse(R"([{"type":"file_search"}])")}}, "tools"},
      {{{"input", ojson::parse(R"([{"type":"item_reference","id":"x"}])")}}, "input"},
      {{{"input", ojson::parse(R"([{"role":"user","content":[{"type":"input_file"}]}])")}}, "input"},
      {{{"input", ojson::parse(R"([{"type":"function_call","call_id":"c","name":"f","arguments":"[1]"}])")}}, "input"},
      {{{"input", 3}}, "input"},
      {{{"input", "x"}, {"text", {{"format", {{"type", "xml"}}}}}}, "text"},
      {{{"input", "x"}, {"truncation", "auto"}}, "truncation"},
      {{{"input", "x"}, {"store", "no"}}, "store"},
      {{{"input", "x"}, {"max_output_tokens", -1}}, "max_output_tokens"},
  };
  for (const auto& [b, param] : cases) {
    try {
      responses_to_chat(body(b), nullptr);
      ADD_FAILURE() << "accepted " << b.dump();
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), param) << b.dump() << ": " << e.what();
    }
  }
}

TEST(ResponsesRequest, OutputLogprobsOnlyWhenIncluded) {
  // vLLM's pairing: top_logprobs asks for alternatives, include asks for the logprobs at all.
  auto r = responses_to_chat(body({{"input", "x"}, {"top_logprobs", 3}}), nullptr);
  EXPECT_FALSE(r.output_logprobs);
  EXPECT_FALSE(r.chat.ordered.contains("logprobs"));
  EXPECT_FALSE(r.chat.ordered.contains("top_logprobs"));
  r = responses_to_chat(body({{"input", "x"}, {"top_logprobs", 3},
                              {"include", {"reasoning.encrypted_content", "message.output_text.logprobs"}}}),
                        nullptr);
  EXPECT_TRUE(r.output_logprobs);
  EXPECT_EQ(r.chat.ordered["logprobs"], true);
  EXPECT_EQ(r.chat.ordered["top_logprobs"], 3);
  r = responses_to_chat(body({{"input", "x"}, {"include", {"message.output_text.logprobs"}}}), nullptr);
  EXPECT_TRUE(r.output_logprobs);
  EXPECT_FALSE(r.chat.ordered.contains("top_logprobs"));
  for (const ojson& bad : {ojson(-1), ojson(1.5), ojson("2")}) {
    try {
      responses_to_chat(body({{"input", "x"}, {"top_logprobs", bad}}), nullptr);
      ADD_FAILURE() << "accepted top_logprobs " << bad.dump();
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param(), "top_logprobs");
    }
  }
}

StoredResponse stored(size_t text_bytes) {
  return StoredResponse{{{"text", std::string(text_bytes, 'x')}}, ojson::array()};
}

TEST(ResponseStore, DropsTheLeastRecentlyUsedBeyondCountOrBytes) {
  ResponseStore by_count(2, 1 << 20);
  by_count.put("a", stored(1));
  by_count.put("b", stored(1));
  ASSERT_TRUE(by_count.get("a"));  // a is now the most recent
  by_count.put("c", stored(1));
  EXPECT_TRUE(by_count.get("a"));
  EXPECT_FALSE(by_count.get("b"));
  EXPECT_TRUE(by_count.get("c"));
  EXPECT_EQ(by_count.size(), 2u);

  ResponseStore by_bytes(100, 300);
  by_bytes.put("a", stored(100));
  by_bytes.put("b", stored(100));
  by_bytes.put("c", stored(100));  // ~3 x 120 bytes > 300: a goes
  EXPECT_FALSE(by_bytes.get("a"));
  EXPECT_TRUE(by_bytes.get("c"));
  by_bytes.put("huge", stored(1000));  // larger than the budget: not kept, nothing else dropped
  EXPECT_FALSE(by_bytes.get("huge"));
  EXPECT_TRUE(by_bytes.get("b"));
  EXPECT_TRUE(by_bytes.erase("b"));
  EXPECT_FALSE(by_bytes.erase("b"));
  by_bytes.put("c", stored(5));  // replacing an id keeps one entry
  EXPECT_EQ(by_bytes.size(), 1u);
}

}  // namespace
}  // namespace striker::server
