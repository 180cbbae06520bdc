// ChatTemplate loading and vLLM's message preprocessing (reference/chat-format.md §1.5).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "chat/chat_template.h"
#include "core/error.h"

using nlohmann::ordered_json;

namespace {

const std::filesystem::path kFlintTokenizer = std::filesystem::path(STRIKER_SHARED_DIR) / "fixtures/flint-tokenizer";

std::filesystem::path temp_dir_with(const std::string& name, const std::string& config_text,
                                    const std::string& jinja_text = "") {
  auto dir = std::filesystem::temp_directory_path() / ("striker_jinja_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  if (!config_text.empty()) std::ofstream(dir / "tokenizer_config.json") << config_text;
  if (!jinja_text.empty()) std::ofstream(dir / "chat_template.jinja") << jinja_text;
  return dir;
}

}  // namespace

TEST(JinjaChatTemplate, FlintRenderA) {
  auto t = striker::ChatTemplate::from_tokenizer_dir(kFlintTokenizer);
  ordered_json vars = ordered_json::parse(
      R"({"messages": [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hello"}],
          "add_generation_prompt": true})");
  EXPECT_EQ(t->render_ordered(vars), "[gMASK]<sop><|system|>You are helpful.<|user|>Hello<|assistant|><think>");
  // The sorted-key overload renders the same here (no tojson of client objects).
  EXPECT_EQ(t->render(nlohmann::json::parse(vars.dump())), t->render_ordered(vars));
}

TEST(JinjaChatTemplate, VariablesFromOpenAIRequest) {
  auto messages = ordered_json::parse(R"([
    {"role": "system", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    {"role": "user", "content": "Q"},
    {"role": "assistant", "content": null, "reasoning_content": "R",
     "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"z\": 1, \"a\": [2]}"}},
                    {"id": "c2", "type": "function", "function": {"name": "g", "arguments": ""}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "ok", "name": "f"},
    {"role": "assistant", "content": "done", "tool_calls": [], "reasoning": "R2"}])");
  auto tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "f", "strict": true}}])");
  auto kwargs = ordered_json::parse(R"({"enable_thinking": false, "add_generation_prompt": false})");
  auto v = striker::chat_template_variables_ordered(messages, tools, true, kwargs);
  EXPECT_EQ(v["messages"][0]["content"], "a\nb");
  EXPECT_EQ(v["messages"][2]["content"], "");
  EXPECT_EQ(v["messages"][2]["reasoning"], "R");
  EXPECT_EQ(v["messages"][2]["reasoning_content"], "R");
  EXPECT_EQ(v["messages"][2]["tool_calls"][0]["function"]["arguments"].dump(), R"({"z":1,"a":[2]})");
  EXPECT_EQ(v["messages"][2]["tool_calls"][1]["function"]["arguments"], ordered_json::object());
  EXPECT_EQ(v["messages"][3].dump(), R"({"role":"tool","content":"ok","tool_call_id":"c1","name":"f"})");
  EXPECT_FALSE(v["messages"][4].contains("tool_calls"));  // empty list removed
  EXPECT_EQ(v["messages"][4]["reasoning_content"], "R2");
  EXPECT_EQ(v["tools"].dump(),
            R"([{"type":"function","function":{"name":"f","description":null,"parameters":null,"strict":true}}])");
  EXPECT_EQ(v["enable_thinking"], false);
  EXPECT_EQ(v["add_generation_prompt"], false);  // kwargs win
  EXPECT_TRUE(v["documents"].is_null());
}

TEST(JinjaChatTemplate, VariablesRejectBadInput) {
  auto bad_args = ordered_json::parse(
      R"([{"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}])");
  EXPECT_THROW(striker::chat_template_variables_ordered(bad_args, nullptr, true, nullptr), striker::Error);
  auto image = ordered_json::parse(R"([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}])");
  EXPECT_THROW(striker::chat_template_variables_ordered(image, nullptr, true, nullptr), striker::Error);
  EXPECT_THROW(striker::chat_template_variables_ordered(ordered_json::parse("[{}]"), nullptr, true, nullptr),
               striker::Error);
  EXPECT_THROW(striker::chat_template_variables_ordered(ordered_json::array(), ordered_json::parse("[1]"), true,
                                                        nullptr),
               striker::Error);
}

TEST(JinjaChatTemplate, TemplateSources) {
  auto list_dir = temp_dir_with("list",
                                R"({"chat_template": [{"name": "tool_use", "template": "T"},
                                                      {"name": "default", "template": "D{{ eos_token }}"}],
                                    "eos_token": {"content": "</s>"}})");
  EXPECT_EQ(striker::ChatTemplate::from_tokenizer_dir(list_dir)->render_ordered(ordered_json::object()), "D</s>");
  auto jinja_dir = temp_dir_with("file", R"({"bos_token": "<s>"})", "J{{ bos_token }}\n");
  EXPECT_EQ(striker::ChatTemplate::from_tokenizer_dir(jinja_dir)->render_ordered(ordered_json::object()), "J<s>");
  // A variable given by the caller overrides the tokenizer's special token.
  EXPECT_EQ(striker::ChatTemplate::from_tokenizer_dir(jinja_dir)->render_ordered(
                ordered_json::parse(R"({"bos_token": "B"})")),
            "JB");
  auto none_dir = temp_dir_with("none", R"({"eos_token": "x"})");
  EXPECT_THROW(striker::ChatTemplate::from_tokenizer_dir(none_dir), striker::Error);
  auto no_default = temp_dir_with("nodefault", R"({"chat_template": [{"name": "a", "template": "x"}]})");
  EXPECT_THROW(striker::ChatTemplate::from_tokenizer_dir(no_default), striker::Error);
  auto syntax = temp_dir_with("syntax", R"({"chat_template": "{% if %}"})");
  try {
    striker::ChatTemplate::from_tokenizer_dir(syntax);
    FAIL() << "expected a syntax error";
  } catch (const striker::Error& e) {
    EXPECT_NE(std::string(e.what()).find(":1:7:"), std::string::npos) << e.what();
  }
}
