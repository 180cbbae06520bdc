// Tokenizer factories and the streaming detokenizer.
#include "tokenizer/tokenizer.h"

#include <cctype>

#include "core/error.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/utf8.h"

namespace striker {

std::unique_ptr<Tokenizer> Tokenizer::from_dir(const std::filesystem::path& dir) {
  const auto json = dir / "tokenizer.json";
  if (!std::filesystem::is_regular_file(json))
    throw Error(json.string() + ": no tokenizer.json in the tokenizer directory");
  const auto config = dir / "tokenizer_config.json";
  return std::make_unique<tok::HfTokenizer>(json, std::filesystem::is_regular_file(config) ? config
                                                                                          : std::filesystem::path());
}

std::unique_ptr<Tokenizer> Tokenizer::from_file(const std::filesystem::path& file) {
  return std::make_unique<tok::HfTokenizer>(file, std::filesystem::path());
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, bool skip) : tok_(tok), skip_special_(skip) {}

namespace {

// "<0xAB>": a byte-fallback token. A run of them is decoded as one group (valid UTF-8 or one
// U+FFFD per byte), so text is held back until the run ends.
bool is_byte_fallback_token(const std::optional<std::string>& piece) {
  return piece && piece->size() == 6 && piece->starts_with("<0x") && piece->back() == '>' &&
         std::isxdigit(static_cast<unsigned char>((*piece)[3])) && std::isxdigit(static_cast<unsigned char>((*piece)[4]));
}

}  // namespace

// Decodes a window that starts a few tokens back (prefix_offset_) so that decoders which look
// at neighbours see context, and emits the text past read_offset_ once it no longer ends in an
// incomplete UTF-8 sequence (shown by decode() as U+FFFD).
// Whatever is held back at the end comes out of flush().
std::string IncrementalDetokenizer::push(int32_t id) {
  ids_.push_back(id);
  const auto piece = tok_.id_to_token(id);
  const bool decoded = piece && !(skip_special_ && tok_.is_special(id));
  // Tokens decode() leaves out (unknown ids, skipped specials) do not end a byte run.
  if (decoded) in_byte_run_ = is_byte_fallback_token(piece);
  if (in_byte_run_) return {};
  const std::span<const int32_t> all(ids_);
  const std::string prefix = tok_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_);
  const std::string text = tok_.decode(all.subspan(prefix_offset_), skip_special_);
  if (text.size() <= prefix.size() || tok::ends_with_replacement_char(text) || !text.starts_with(prefix))
    return {};
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  return text.substr(prefix.size());
}

std::string IncrementalDetokenizer::flush() {
  in_byte_run_ = false;
  const std::span<const int32_t> all(ids_);
  const std::string prefix = tok_.decode(all.subspan(prefix_offset_, read_offset_ - prefix_offset_), skip_special_);
  const std::string text = tok_.decode(all.subspan(prefix_offset_), skip_special_);
  prefix_offset_ = read_offset_ = ids_.size();
  if (!text.starts_with(prefix)) {
    throw Error("streaming decode: the decoder is not prefix-stable, cannot flush consistently");
  }
  return text.substr(prefix.size());
}

}  // namespace striker
