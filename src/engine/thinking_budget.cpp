#include "engine/thinking_budget.h"

#include <algorithm>
#include <stdexcept>

namespace striker {

namespace {

// Where `seq` last occurs in `tokens` (-1: nowhere). Prompts end near their open section, so the
// search runs backwards.
int64_t last_index(std::span<const int32_t> tokens, const std::vector<int32_t>& seq) {
  if (seq.empty() || seq.size() > tokens.size()) return -1;
  for (int64_t i = int64_t(tokens.size() - seq.size()); i >= 0; --i)
    if (std::equal(seq.begin(), seq.end(), tokens.begin() + i)) return i;
  return -1;
}

}  // namespace

ThinkingBudget::ThinkingBudget(std::shared_ptr<const ReasoningDelimiters> delimiters, int32_t budget,
                               std::span<const int32_t> prompt)
    : delimiters_(std::move(delimiters)), budget_(budget) {
  if (!delimiters_ || !delimiters_->known()) throw std::logic_error("a thinking budget needs the reasoning delimiters");
  if (budget_ < 0) throw std::logic_error("a thinking budget must be >= 0");
  const ReasoningDelimiters& d = *delimiters_;
  // The prompt leaves a section open when its last start comes after its last end: the template
  // opened it for the model (GLM-4.7's `<|assistant|><think>`), or the prompt continues one.
  const int64_t start = last_index(prompt, d.start), end = last_index(prompt, d.end);
  const size_t keep = std::max(d.start.size(), d.end.size());
  recent_.assign(prompt.end() - int64_t(std::min(keep, prompt.size())), prompt.end());
  if (start >= 0 && start > end) {
    phase_ = Phase::Inside;
    count_ = int64_t(prompt.size()) - (start + int64_t(d.start.size()));
    maybe_force();
  }
}

bool ThinkingBudget::tail_is(const std::vector<int32_t>& seq) const {
  return recent_.size() >= seq.size() && std::equal(seq.begin(), seq.end(), recent_.end() - int64_t(seq.size()));
}

void ThinkingBudget::push(int32_t token) {
  recent_.push_back(token);
  const size_t keep = std::max(delimiters_->start.size(), delimiters_->end.size());
  if (recent_.size() > keep) recent_.erase(recent_.begin(), recent_.end() - int64_t(keep));
}

void ThinkingBudget::maybe_force() {
  if (count_ < budget_) return;
  phase_ = Phase::Forcing;
  // A multi-token end the model already began (its first k tokens end the output, inside the
  // section) is completed rather than started over, so the section closes with one end.
  const std::vector<int32_t>& end = delimiters_->end;
  forced_ = 0;
  for (size_t k = std::min<size_t>(end.size() - 1, size_t(count_)); k > 0; --k)
    if (recent_.size() >= k && std::equal(end.begin(), end.begin() + int64_t(k), recent_.end() - int64_t(k))) {
      forced_ = k;
      break;
    }
}

bool ThinkingBudget::may_force_after_one_token() const {
  switch (phase_) {
    case Phase::Outside: return budget_ == 0;  // the token may complete the start
    case Phase::Inside: return count_ + 1 >= budget_;
    case Phase::Forcing: return true;           // the rest of a longer end, or a stray token's retry
    case Phase::Closed: return false;
  }
  return true;
}

void ThinkingBudget::accept(int32_t token) {
  const ReasoningDelimiters& d = *delimiters_;
  switch (phase_) {
    case Phase::Outside:
      push(token);
      if (tail_is(d.start)) {
        phase_ = Phase::Inside;
        count_ = 0;
        maybe_force();
      }
      break;
    case Phase::Inside:
      push(token);
      if (tail_is(d.end)) {  // the model closed the section itself
        phase_ = Phase::Closed;
        break;
      }
      ++count_;
      maybe_force();
      break;
    case Phase::Forcing:
      // The draw was masked to the forced token. Were another token recorded anyway, the next
      // draw is forced again: the end is never given up.
      push(token);
      if (token == d.end[forced_] && ++forced_ == d.end.size()) phase_ = Phase::Closed;
      break;
    case Phase::Closed:
      break;
  }
}

}  // namespace striker
