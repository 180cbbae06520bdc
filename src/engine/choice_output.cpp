#include "engine/choice_output.h"

#include <algorithm>

namespace striker {

namespace {

class DetokenizerStream : public TokenTextStream {
 public:
  DetokenizerStream(const Tokenizer& tok, bool skip) : detok_(tok, skip) {}
  std::string push(int32_t id) override { return detok_.push(id); }
  std::string flush() override { return detok_.flush(); }

 private:
  IncrementalDetokenizer detok_;
};

bool contains(const std::vector<int32_t>& v, int32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

TextStreamFactory detokenizer_stream_factory(const Tokenizer& tok) {
  return [&tok](bool skip) { return std::make_unique<DetokenizerStream>(tok, skip); };
}

std::vector<int32_t> StopRules::suppressed_ids() const {
  std::vector<int32_t> ids = stop_token_ids;
  if (!ignore_eos) ids.insert(ids.end(), eos_ids.begin(), eos_ids.end());
  return ids;
}

ChoiceOutput::ChoiceOutput(const StopRules& rules, std::vector<std::string> stop_strings,
                           std::unique_ptr<TokenTextStream> text, bool include_stop_str)
    : rules_(rules), stops_(std::move(stop_strings), include_stop_str), text_(std::move(text)) {}

void ChoiceOutput::finish(FinishReason why, std::optional<std::string> reason, ChoiceDelta& delta) {
  finished_ = true;
  delta.finish = why;
  delta.stop_reason = std::move(reason);
}

void ChoiceOutput::on_token(int32_t token, int64_t num_output, int64_t num_tokens, ChoiceDelta& delta) {
  if (finished_) return;
  delta.new_tokens.push_back(token);
  // vLLM checks no stop condition before min_tokens (stop ids are also masked while sampling).
  const bool armed = num_output >= rules_.min_tokens;
  const bool user_stop = armed && contains(rules_.stop_token_ids, token);
  const bool eos = armed && !rules_.ignore_eos && contains(rules_.eos_ids, token);
  if (user_stop || eos) {
    // The stop token itself adds no text; pending bytes are released.
    auto r = stops_.finish(text_->flush(), armed);
    delta.new_text += r.text;
    if (r.matched)
      finish(FinishReason::Stop, r.matched, delta);
    else
      finish(FinishReason::Stop, user_stop ? std::optional<std::string>(std::to_string(token)) : std::nullopt, delta);
    return;
  }
  auto r = stops_.feed(text_->push(token), armed);
  delta.new_text += r.text;
  if (r.matched) return finish(FinishReason::Stop, r.matched, delta);
  if (num_output >= rules_.max_tokens || num_tokens >= rules_.max_model_len) {
    auto tail = stops_.finish(text_->flush(), armed);
    delta.new_text += tail.text;
    if (tail.matched) return finish(FinishReason::Stop, tail.matched, delta);
    finish(FinishReason::Length, std::nullopt, delta);
  }
}

void ChoiceOutput::mark_aborted(ChoiceDelta& delta) {
  if (finished_) return;
  finish(FinishReason::Abort, std::nullopt, delta);
}

}  // namespace striker
