// Turns one choice's sampled tokens into text deltas and decides when the choice finishes
// (stop token, stop string, max_tokens, max_model_len).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/stop_strings.h"

namespace striker {

// A stream of token ids to text. The engine wraps IncrementalDetokenizer; the interface keeps
// the output logic testable on its own.
class TokenTextStream {
 public:
  virtual ~TokenTextStream() = default;
  virtual std::string push(int32_t id) = 0;
  virtual std::string flush() = 0;
};
using TextStreamFactory = std::function<std::unique_ptr<TokenTextStream>(bool skip_special_tokens)>;

// The default factory: IncrementalDetokenizer over `tok` (which must outlive the streams).
TextStreamFactory detokenizer_stream_factory(const Tokenizer& tok);

struct StopRules {
  std::vector<int32_t> eos_ids;          // the model's; ignored with ignore_eos
  std::vector<int32_t> stop_token_ids;   // the request's
  int32_t min_tokens = 0;
  int32_t max_tokens = 16;
  int64_t max_model_len = 0;
  bool ignore_eos = false;
  // Ids the sampler must mask while fewer than min_tokens tokens were produced.
  std::vector<int32_t> suppressed_ids() const;
};

class ChoiceOutput {
 public:
  ChoiceOutput(const StopRules& rules, std::vector<std::string> stop_strings, std::unique_ptr<TokenTextStream> text,
               bool include_stop_str = false);
  // Records one sampled token into `delta` (new_tokens, new_text, finish, stop_reason).
  // num_output: output tokens including this one; num_tokens: prompt + output.
  void on_token(int32_t token, int64_t num_output, int64_t num_tokens, ChoiceDelta& delta);
  bool finished() const { return finished_; }
  void mark_aborted(ChoiceDelta& delta);

 private:
  void finish(FinishReason why, std::optional<std::string> reason, ChoiceDelta& delta);

  const StopRules& rules_;
  StopStringFilter stops_;
  std::unique_ptr<TokenTextStream> text_;
  bool finished_ = false;
};

}  // namespace striker
