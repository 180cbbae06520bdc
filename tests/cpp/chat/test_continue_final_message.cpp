// continue_final_message on the Flint (GLM-4.7) template: the prompt is the conversation rendered
// with add_generation_prompt=false, cut right after the final assistant message's content.
#include <gtest/gtest.h>

#include <filesystem>

#include "chat/chat_template.h"
#include "chat/glm47_parser.h"
#include "core/error.h"

using nlohmann::json;

namespace {

const std::filesystem::path kFlintTokenizer = std::filesystem::path(STRIKER_SHARED_DIR) / "fixtures/flint-tokenizer";

std::string render(const json& messages) {
  static const auto tmpl = striker::ChatTemplate::from_tokenizer_dir(kFlintTokenizer);
  return tmpl->render(striker::chat_template_variables(messages, nullptr, false, json::object()));
}

std::string continued(const json& messages) { return striker::cut_after_final_message(render(messages), messages); }

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

TEST(ContinueFinalMessage, PlainContentEndsThePrompt) {
  auto m = json::parse(R"([{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "The answer is"}])");
  EXPECT_EQ(continued(m), "[gMASK]<sop><|user|>Q1<|assistant|></think>The answer is");
  // Trailing whitespace: the template strips it, so the cut follows the stripped text.
  m[1]["content"] = "  The answer is \n";
  EXPECT_EQ(continued(m), "[gMASK]<sop><|user|>Q1<|assistant|></think>The answer is");
}

TEST(ContinueFinalMessage, ReasoningContentStaysBeforeTheContinuedText) {
  auto m = json::parse(R"([{"role": "user", "content": "Q"},
    {"role": "assistant", "reasoning_content": "Think hard.", "content": "So far"}])");
  const std::string p = continued(m);
  EXPECT_EQ(p, "[gMASK]<sop><|user|>Q<|assistant|><think>Think hard.</think>So far");
  EXPECT_TRUE(striker::glm47_is_reasoning_end(p, true));  // output continues the content
}

TEST(ContinueFinalMessage, ToolCallsAfterTheContentAreCutOff) {
  auto m = json::parse(R"([{"role": "user", "content": "Q"},
    {"role": "assistant", "content": "Let me check.",
     "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}])");
  const std::string full = render(m);
  ASSERT_NE(full.find("<tool_call>f"), std::string::npos) << full;  // the template renders them ...
  EXPECT_EQ(continued(m), "[gMASK]<sop><|user|>Q<|assistant|></think>Let me check.");  // ... the cut drops them
}

TEST(ContinueFinalMessage, OpenThinkBlockIsContinuedAsReasoning) {
  // Content with `<think>` but no `</think>`: the template does not split it, so the prompt ends
  // inside an open think block and the model continues the reasoning.
  auto m = json::parse(R"([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>Step one,"}])");
  const std::string p = continued(m);
  EXPECT_TRUE(ends_with(p, "<|assistant|></think><think>Step one,")) << p;
  EXPECT_FALSE(striker::glm47_is_reasoning_end(p, true));
}

TEST(ContinueFinalMessage, LastTextPartOfArrayContent) {
  auto m = json::parse(R"([{"role": "user", "content": "Q"},
    {"role": "assistant", "content": [{"type": "text", "text": "Part one."}, {"type": "text", "text": "Part two"}]}])");
  const std::string p = continued(m);
  EXPECT_TRUE(ends_with(p, "Part two")) << p;
}

TEST(ContinueFinalMessage, EmptyContentCutsNothing) {
  // Python's rendered.rindex("") is len(rendered): the prompt is the whole render.
  auto m = json::parse(R"([{"role": "user", "content": "Q"}, {"role": "assistant", "content": ""}])");
  EXPECT_EQ(continued(m), render(m));
  EXPECT_EQ(continued(m), "[gMASK]<sop><|user|>Q<|assistant|></think>");
}

TEST(ContinueFinalMessage, KeepsWhitespaceATemplateKeeps) {
  auto tmpl = striker::ChatTemplate::from_source("{% for m in messages %}<{{ m.role }}>{{ m.content }}<end>{% endfor %}",
                                                 "test");
  auto m = json::parse(R"([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A: "}])");
  const std::string r = tmpl->render(striker::chat_template_variables(m, nullptr, false, json::object()));
  EXPECT_EQ(striker::cut_after_final_message(r, m), "<user>Q<end><assistant>A: ");
  // The last occurrence is the one cut at, not an earlier equal text.
  m = json::parse(R"([{"role": "user", "content": "same"}, {"role": "assistant", "content": "same"}])");
  const std::string r2 = tmpl->render(striker::chat_template_variables(m, nullptr, false, json::object()));
  EXPECT_EQ(striker::cut_after_final_message(r2, m), "<user>same<end><assistant>same");
}

TEST(ContinueFinalMessage, Errors) {
  auto expect_error = [](const json& m, const std::string& needle) {
    try {
      striker::cut_after_final_message(render(m), m);
      ADD_FAILURE() << "no error for " << m.dump();
    } catch (const striker::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(json::parse(R"([{"role": "user", "content": "Q"}])"), "must be an assistant message");
  expect_error(json::parse(R"([{"role": "user", "content": "Q"}, {"role": "assistant", "content": null,
    "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}])"),
               "no content");
  try {  // (the server's validation rejects non-text parts before rendering)
    striker::cut_after_final_message("x", json::parse(R"([{"role": "assistant", "content": [{"type": "image"}]}])"));
    ADD_FAILURE() << "no error for content without a text part";
  } catch (const striker::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no text content"), std::string::npos) << e.what();
  }
  // The template rewrites `<think>\nR\n</think>\nA` to `<think>R</think>A`: the content is gone.
  expect_error(json::parse(R"([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>\nR\n</think>\nA"}])"),
               "does not appear");
  EXPECT_THROW(striker::cut_after_final_message("x", json::array()), striker::Error);
}
