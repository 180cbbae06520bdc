// Hugging Face decoders (tokenizer.json "decoder"): ByteLevel, ByteFallback, Fuse, Strip,
// Replace, Metaspace and Sequence. Each step maps a list of token strings to a list of strings; the
// tokenizer joins the final list.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_access.h"

namespace striker::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

std::unique_ptr<Decoder> make_decoder(const JsonRef& j);

}  // namespace striker::tok
