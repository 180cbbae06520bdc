// Hugging Face tokenizer.json (BPE, byte-level) — encode, decode, streaming decode.
// CONTRACT header: the engine and server code against these declarations.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace striker {

class Tokenizer {
 public:
  // Loads `dir/tokenizer.json` (and `dir/tokenizer_config.json` where present for
  // added-token flags). Throws striker::Error naming the file and field on bad input.
  static std::unique_ptr<Tokenizer> from_dir(const std::filesystem::path& dir);
  static std::unique_ptr<Tokenizer> from_file(const std::filesystem::path& tokenizer_json);
  virtual ~Tokenizer() = default;

  // add_special_tokens applies the post-processor (as HF `encode(add_special_tokens=...)`).
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const = 0;
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual std::optional<std::string> id_to_token(int32_t id) const = 0;  // the raw piece
  virtual int64_t vocab_size() const = 0;  // highest id + 1 (incl. added tokens)
  virtual bool is_special(int32_t id) const = 0;
  // An added token (tokenizer.json "added_tokens", special or not: <|user|>, <tool_call>, ...):
  // matched as a whole in text, never produced by the byte-level model.
  virtual bool is_added(int32_t id) const { return is_special(id); }
};

// Streaming decode: push ids one at a time; returns only complete, valid UTF-8 text.
// The concatenation of every push() and the final flush() equals tokenizer.decode(all ids).
class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tok, bool skip_special_tokens);
  std::string push(int32_t id);
  std::string flush();

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_offset_ = 0;
  size_t read_offset_ = 0;
  bool in_byte_run_ = false;  // the last decoded token was a byte-fallback "<0xAB>" token
};

}  // namespace striker
