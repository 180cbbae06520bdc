// The Hugging Face tokenizer.json pipeline behind striker::Tokenizer:
// added tokens -> normalizer -> pre-tokenizer -> BPE model -> post-processor; decoder for decode().
//
// Parity with the `tokenizers` package (0.23) is tested id for id (tests/python/test_tokenizer_*).
// Known differences, all from Unicode table versions rather than logic:
//  - regexes run on PCRE2 10.42 (Unicode 14) where `tokenizers` uses Oniguruma (Unicode 16), so
//    the ~9.4k letters/digits assigned in Unicode 15-16 may split differently;
//  - NFKC uses ICU 72 (Unicode 15), which maps 134 code points (e.g. U+32FF) that the older
//    tables in `tokenizers` leave alone. NFC agrees on every single code point.
// Not supported (clear error naming the JSON path): WordPiece/WordLevel/Unigram models, BPE
// dropout, truncation, fixed-length padding, and components not listed in the make_* factories.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/added_vocab.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/segment_cache.h"
#include "tokenizer/tokenizer.h"

namespace striker::tok {

class HfTokenizer : public Tokenizer {
 public:
  // `config_json` (may be empty) is tokenizer_config.json, whose added_tokens_decoder can
  // override the flags of added tokens the way transformers applies them.
  HfTokenizer(const std::filesystem::path& tokenizer_json, const std::filesystem::path& config_json);

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::optional<std::string> id_to_token(int32_t id) const override;
  int64_t vocab_size() const override;
  bool is_special(int32_t id) const override;
  bool is_added(int32_t id) const override { return added_.by_id(id) != nullptr; }
  // Long segments whose ids are kept (SegmentCache), for tests.
  size_t cached_segments() const { return segments_.entries(); }

 private:
  std::vector<AddedToken> load_added_tokens(const JsonRef& list) const;
  void apply_config_overrides(const std::filesystem::path& config_json, std::vector<AddedToken>& tokens) const;
  void encode_plain(std::string_view text, bool at_text_start, std::vector<int32_t>& ids) const;
  // encode_plain through segments_ for long segments.
  void encode_segment(std::string_view text, bool at_text_start, std::vector<int32_t>& ids) const;

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  AddedVocab added_;
  SegmentCache segments_;  // ids of long segments seen recently (resent conversation history)
};

}  // namespace striker::tok
