// Hugging Face normalizers (tokenizer.json "normalizer"): NFC/NFD/NFKC/NFKD, Lowercase,
// Strip, Replace, Prepend and Sequence. Offsets are not tracked: striker only needs ids.
#pragma once
#include <memory>
#include <string>

#include "tokenizer/json_access.h"

namespace striker::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(std::string& text) const = 0;  // text is valid UTF-8
};

// Null JSON gives nullptr (no normalizer). Unsupported types throw naming the JSON path.
std::unique_ptr<Normalizer> make_normalizer(const JsonRef& j);

}  // namespace striker::tok
