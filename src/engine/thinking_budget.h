// A request's thinking token budget (vLLM's `thinking_token_budget`): the tokens the model
// generates inside its reasoning section are counted, and once they reach the budget while the
// section is still open, the reasoning end (`</think>`) is forced token by token; the output then
// goes on as usual. The engine turns a forced token into a one-token mask on the same path as
// structured-output masks, so every sampler (host, device, async, speculative rows) honours it.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace striker {

// Where a reasoning section starts and ends, as token ids (vLLM's ReasoningConfig: its start and
// end strings tokenized). Both empty: the server knows no reasoning format, so no budget can run.
struct ReasoningDelimiters {
  std::vector<int32_t> start;  // e.g. `<think>`
  std::vector<int32_t> end;    // e.g. `</think>`
  bool known() const { return !start.empty() && !end.empty(); }
};

// One choice's count against its budget. The budget covers one reasoning section: the one the
// prompt leaves open (the GLM-4.7 template's generation prompt ends with `<think>`), else the
// first the model opens. Tokens after the start sequence count, the prompt's own included (as
// vLLM counts them); once the section has closed, by the model or by force, nothing more is
// forced. Cheap to copy: the engine advances copies over speculative guesses.
class ThinkingBudget {
 public:
  ThinkingBudget(std::shared_ptr<const ReasoningDelimiters> delimiters, int32_t budget,
                 std::span<const int32_t> prompt);

  // The token the next draw must be (the next token of the reasoning end), or -1: any token.
  int32_t forced_token() const { return phase_ == Phase::Forcing ? delimiters_->end[forced_] : -1; }
  // Records a generated token.
  void accept(int32_t token);
  // The section has closed: nothing will ever be forced again.
  bool closed() const { return phase_ == Phase::Closed; }
  // Whether the draw after one more token, whichever it is, may be forced (async scheduling sizes
  // a step's masks before the token before it is known).
  bool may_force_after_one_token() const;
  bool in_reasoning() const { return phase_ == Phase::Inside || phase_ == Phase::Forcing; }
  int64_t reasoning_tokens() const { return count_; }  // counted in the section so far

 private:
  enum class Phase { Outside, Inside, Forcing, Closed };
  bool tail_is(const std::vector<int32_t>& seq) const;
  void push(int32_t token);
  // Inside with the budget spent: force the end, continuing a partial end the model has begun.
  void maybe_force();

  std::shared_ptr<const ReasoningDelimiters> delimiters_;
  int32_t budget_;
  Phase phase_ = Phase::Outside;
  int64_t count_ = 0;
  size_t forced_ = 0;             // Forcing: how many end tokens are already in the output
  std::vector<int32_t> recent_;   // the last tokens (prompt, then output), enough to match either sequence
};

}  // namespace striker
