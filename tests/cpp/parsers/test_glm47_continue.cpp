// The glm47 parser when the prompt already closed its think block (continue_final_message).
#include <gtest/gtest.h>

#include "chat/glm47_parser.h"

namespace {

striker::Glm47Parser make(bool ended) {
  striker::Glm47ParserOptions o;
  o.thinking = true;
  o.reasoning_ended_in_prompt = ended;
  return striker::Glm47Parser(std::move(o));
}

std::string fed_content(striker::Glm47Parser& p, const std::string& text) {
  std::string content;
  for (char c : text) content += p.feed(std::string(1, c)).content;  // split everywhere
  content += p.finish().content;
  return content;
}

}  // namespace

TEST(Glm47Continue, OutputStartsAsContentWhenThePromptEndedReasoning) {
  auto p = make(true);
  EXPECT_EQ(fed_content(p, " and more."), " and more.");
  EXPECT_FALSE(p.message().reasoning.has_value());
  EXPECT_EQ(p.message().content, " and more.");
}

TEST(Glm47Continue, ThinkMarkersStillWork) {
  auto p = make(true);
  p.feed("a</think>b<think>r</think>c");
  p.finish();
  EXPECT_EQ(p.message().content, "abc");  // a stray `</think>` in content is swallowed
  EXPECT_EQ(p.message().reasoning, "r");  // `<think>` in content opens reasoning
}

TEST(Glm47Continue, DefaultStillStartsInReasoning) {
  auto p = make(false);
  p.feed("r</think>c");
  p.finish();
  EXPECT_EQ(p.message().reasoning, "r");
  EXPECT_EQ(p.message().content, "c");
}
