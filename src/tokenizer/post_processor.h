// Hugging Face post-processors (tokenizer.json "post_processor") for single sequences:
// TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel (ids unchanged) and Sequence.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "tokenizer/json_access.h"

namespace striker::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Called only when special tokens are requested (encode(..., add_special_tokens = true)).
  virtual void add_special_tokens(std::vector<int32_t>& ids) const = 0;
};

std::unique_ptr<PostProcessor> make_post_processor(const JsonRef& j);

}  // namespace striker::tok
