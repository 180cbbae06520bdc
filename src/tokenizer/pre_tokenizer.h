// Hugging Face pre-tokenizers (tokenizer.json "pre_tokenizer"): Split (regex or literal, every
// `behavior`, `invert`), ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit and Sequence.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_access.h"

namespace striker::tok {

struct Piece {
  std::string text;
  bool at_text_start = false;  // begins at offset 0 of the original text (Metaspace "first")
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces each piece by the pieces it splits into (empty pieces are dropped).
  virtual void pre_tokenize(std::vector<Piece>& pieces) const = 0;
};

// Null JSON gives nullptr. Unsupported types throw naming the JSON path.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JsonRef& j);

}  // namespace striker::tok
