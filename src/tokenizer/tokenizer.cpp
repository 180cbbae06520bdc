// STUB until the tokenizer part lands: replaced by the real implementation.
#include "tokenizer/tokenizer.h"

#include "core/error.h"

namespace striker {

std::unique_ptr<Tokenizer> Tokenizer::from_dir(const std::filesystem::path& dir) {
  throw Error(dir.string() + ": the tokenizer is not available yet");
}
std::unique_ptr<Tokenizer> Tokenizer::from_file(const std::filesystem::path& file) {
  throw Error(file.string() + ": the tokenizer is not available yet");
}

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, bool skip) : tok_(tok), skip_special_(skip) {}
std::string IncrementalDetokenizer::push(int32_t) { throw Error("the tokenizer is not available yet"); }
std::string IncrementalDetokenizer::flush() { return ""; }

}  // namespace striker
