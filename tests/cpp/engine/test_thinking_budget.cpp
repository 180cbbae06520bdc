// ThinkingBudget (vLLM's thinking_token_budget): what is counted, when the reasoning end is
// forced, and when nothing is.
#include <gtest/gtest.h>

#include "engine/thinking_budget.h"

using namespace striker;

namespace {

constexpr int32_t kStart = 100, kEnd = 101;

std::shared_ptr<const ReasoningDelimiters> think_tags() {
  return std::make_shared<const ReasoningDelimiters>(ReasoningDelimiters{{kStart}, {kEnd}});
}

// Feeds free tokens (1, 2, 3, ...) and forced ones as a masked sampler would draw them; returns the
// output and stops after `n` tokens.
std::vector<int32_t> generate(ThinkingBudget& b, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    const int32_t forced = b.forced_token();
    out.push_back(forced >= 0 ? forced : i + 1);
    b.accept(out.back());
  }
  return out;
}

}  // namespace

TEST(ThinkingBudget, ASectionTheTemplateOpenedIsCutAtTheBudgetThenFree) {
  ThinkingBudget b(think_tags(), 3, std::vector<int32_t>{7, 8, kStart});  // GLM-4.7: ...<|assistant|><think>
  EXPECT_TRUE(b.in_reasoning());
  EXPECT_EQ(b.forced_token(), -1);
  const std::vector<int32_t> out = generate(b, 7);
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 3, kEnd, 5, 6, 7}));  // 3 reasoning tokens, the end, the answer
  EXPECT_TRUE(b.closed());
  EXPECT_EQ(b.reasoning_tokens(), 3);
}

TEST(ThinkingBudget, BudgetZeroClosesTheSectionAtOnce) {
  ThinkingBudget b(think_tags(), 0, std::vector<int32_t>{7, kStart});
  EXPECT_EQ(b.forced_token(), kEnd);
  EXPECT_EQ(generate(b, 3), (std::vector<int32_t>{kEnd, 2, 3}));
  EXPECT_TRUE(b.closed());
}

TEST(ThinkingBudget, ASectionTheModelClosesInTimeIsNeverForced) {
  ThinkingBudget b(think_tags(), 4, std::vector<int32_t>{kStart});
  for (int32_t t : {1, 2, kEnd}) {
    EXPECT_EQ(b.forced_token(), -1);
    b.accept(t);
  }
  EXPECT_TRUE(b.closed());
  for (int32_t t : {3, 4, 5, 6, 7, kStart, 8, 9, 10, 11, 12}) {  // a later <think> is not counted
    EXPECT_EQ(b.forced_token(), -1);
    b.accept(t);
  }
}

TEST(ThinkingBudget, ClosingExactlyAtTheBudgetIsTheModelsOwnEnd) {
  ThinkingBudget b(think_tags(), 2, std::vector<int32_t>{kStart});
  b.accept(1);
  b.accept(2);
  EXPECT_EQ(b.forced_token(), kEnd);  // the budget is spent: only the end may come
  b.accept(kEnd);
  EXPECT_TRUE(b.closed());
}

TEST(ThinkingBudget, WithoutAnOpenSectionCountingStartsWhenTheModelOpensOne) {
  ThinkingBudget b(think_tags(), 2, std::vector<int32_t>{5, 6});
  EXPECT_FALSE(b.in_reasoning());
  for (int32_t t : {1, 2, 3, 4}) {
    EXPECT_EQ(b.forced_token(), -1);
    b.accept(t);
  }
  b.accept(kStart);
  EXPECT_TRUE(b.in_reasoning());
  b.accept(9);
  EXPECT_EQ(b.forced_token(), -1);
  b.accept(9);
  EXPECT_EQ(b.forced_token(), kEnd);
}

TEST(ThinkingBudget, APromptWhoseSectionIsClosedStartsOutside) {
  // enable_thinking false: the template writes <think></think> and the answer follows.
  ThinkingBudget b(think_tags(), 0, std::vector<int32_t>{kStart, 3, kEnd, 4});
  EXPECT_FALSE(b.in_reasoning());
  EXPECT_EQ(b.forced_token(), -1);
  // An earlier turn's closed section followed by an open one: the open one counts.
  ThinkingBudget open(think_tags(), 1, std::vector<int32_t>{kStart, 3, kEnd, 4, kStart});
  EXPECT_TRUE(open.in_reasoning());
  EXPECT_EQ(open.reasoning_tokens(), 0);
}

TEST(ThinkingBudget, ThePromptsReasoningTokensCount) {
  // A continued reasoning section (continue_final_message): its tokens in the prompt use the budget.
  ThinkingBudget b(think_tags(), 3, std::vector<int32_t>{kStart, 1, 2});
  EXPECT_EQ(b.reasoning_tokens(), 2);
  EXPECT_EQ(generate(b, 3), (std::vector<int32_t>{1, kEnd, 3}));
  ThinkingBudget over(think_tags(), 1, std::vector<int32_t>{kStart, 1, 2, 3});
  EXPECT_EQ(over.forced_token(), kEnd);
}

TEST(ThinkingBudget, MultiTokenDelimitersAreMatchedAndForcedInOrder) {
  auto tags = std::make_shared<const ReasoningDelimiters>(ReasoningDelimiters{{50, 51}, {60, 61, 62}});
  ThinkingBudget b(tags, 2, std::vector<int32_t>{50});  // half a start is no start
  EXPECT_FALSE(b.in_reasoning());
  b.accept(51);
  EXPECT_TRUE(b.in_reasoning());
  b.accept(1);
  b.accept(2);
  std::vector<int32_t> forced;
  while (b.forced_token() >= 0) {
    forced.push_back(b.forced_token());
    b.accept(forced.back());
  }
  EXPECT_EQ(forced, (std::vector<int32_t>{60, 61, 62}));
  EXPECT_TRUE(b.closed());
}

TEST(ThinkingBudget, AnEndTheModelBeganIsCompletedNotRestarted) {
  auto tags = std::make_shared<const ReasoningDelimiters>(ReasoningDelimiters{{50}, {60, 61, 62}});
  ThinkingBudget b(tags, 3, std::vector<int32_t>{50});
  b.accept(1);
  b.accept(60);
  b.accept(61);  // the budget is spent two tokens into the end
  EXPECT_EQ(b.forced_token(), 62);
  b.accept(62);
  EXPECT_TRUE(b.closed());
}

TEST(ThinkingBudget, AStrayTokenWhileForcingLeavesTheEndForced) {
  ThinkingBudget b(think_tags(), 0, std::vector<int32_t>{kStart});
  b.accept(5);  // not the forced token (a sampler that ignored the mask)
  EXPECT_EQ(b.forced_token(), kEnd);
}

TEST(ThinkingBudget, MayForceAfterOneTokenIsExactlyWhenTheNextDrawCouldBeForced) {
  ThinkingBudget b(think_tags(), 2, std::vector<int32_t>{kStart});
  EXPECT_FALSE(b.may_force_after_one_token());  // 1 token counted after the next: 1 < 2
  b.accept(1);
  EXPECT_TRUE(b.may_force_after_one_token());
  b.accept(2);
  EXPECT_TRUE(b.may_force_after_one_token());
  b.accept(kEnd);
  EXPECT_FALSE(b.may_force_after_one_token());
  ThinkingBudget outside(think_tags(), 1, std::vector<int32_t>{5});
  EXPECT_FALSE(outside.may_force_after_one_token());
  ThinkingBudget zero(think_tags(), 0, std::vector<int32_t>{5});
  EXPECT_TRUE(zero.may_force_after_one_token());  // the next token may be <think>, and then </think> must follow
}
