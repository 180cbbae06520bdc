// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) that finds all
// non-overlapping matches. Patterns are written for Oniguruma (Hugging Face's engine); the few
// spots where PCRE2 reads them differently are rewritten before compiling. Safe to share between threads: match scratch space comes from a pool.
#pragma once
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace striker::tok {

using Span = std::pair<size_t, size_t>;  // [begin, end) byte offsets

class Regex {
 public:
  // Throws striker::Error("<where>: ...") when the pattern does not compile.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // All non-empty matches, left to right. `text` must be valid UTF-8 (checked by the caller).
  void find_all(std::string_view text, std::vector<Span>& out) const;

  // Escapes a literal so that it matches itself.
  static std::string escape(std::string_view literal);

  // Rewrites \s \S \w \W as the classes Oniguruma means by them (see regex.cpp for why).
  static std::string translate_oniguruma_classes(std::string_view pattern);

 private:
  struct Scratch;
  std::unique_ptr<Scratch> acquire() const;
  void release(std::unique_ptr<Scratch> s) const;

  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
  std::string where_;
  mutable std::mutex pool_mutex_;
  mutable std::vector<std::unique_ptr<Scratch>> pool_;
};

}  // namespace striker::tok
