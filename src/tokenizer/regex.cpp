#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace striker::tok {

// Per-thread-of-use match state: PCRE2 match data is not shareable, and long inputs
// (e.g. 100k spaces) need a JIT stack larger than the 32 KiB default.
struct Regex::Scratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* mctx = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ~Scratch() {
    if (data) pcre2_match_data_free(data);
    if (mctx) pcre2_match_context_free(mctx);
    if (stack) pcre2_jit_stack_free(stack);
  }
};

namespace {

// Class members for what \s and \w mean to Oniguruma (Hugging Face's regex engine), which PCRE2
// reads differently: PCRE2 10.42's \s also takes U+180E (whitespace only before Unicode 6.3),
// and its \w is letters + all numbers + '_' where Oniguruma's is Alphabetic + marks + decimal
// digits + connector punctuation (+ six Latin-1 number signs). Measured code point by code point
// against the tokenizers package; the escapes are rewritten as these classes before compiling.
constexpr const char* kSpaceMembers =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
constexpr const char* kWordMembers =
    "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";

}  // namespace

std::string Regex::translate_oniguruma_classes(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  size_t i = 0;
  while (i < pattern.size()) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      if (e == 'Q') {  // \Q...\E: copied verbatim
        const size_t end = pattern.find("\\E", i + 2);
        const size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
        out.append(pattern.substr(i, stop - i));
        i = stop;
        continue;
      }
      const char* members = (e == 's' || e == 'S') ? kSpaceMembers : (e == 'w' || e == 'W') ? kWordMembers : nullptr;
      if (members && (e == 's' || e == 'w')) {
        out += in_class ? std::string(members) : "[" + std::string(members) + "]";
      } else if (members && !in_class) {  // \S, \W (inside a class they keep PCRE2's meaning)
        out += "[^" + std::string(members) + "]";
      } else {
        out.append(pattern.substr(i, 2));
      }
      i += 2;
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      ++i;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i < pattern.size() && pattern[i] == '^') out.push_back(pattern[i++]);
      if (i < pattern.size() && pattern[i] == ']') out.push_back(pattern[i++]);
      continue;
    }
    if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {  // [:alpha:]
      const size_t end = pattern.find(":]", i + 2);
      if (end != std::string_view::npos) {
        out.append(pattern.substr(i, end + 2 - i));
        i = end + 2;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out.push_back(c);
    ++i;
  }
  return out;
}

Regex::Regex(const std::string& original, const std::string& where) : where_(where) {
  const std::string pattern = translate_oniguruma_classes(original);
  int err = 0;
  PCRE2_SIZE err_off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error(where + ": regex does not compile at offset " + std::to_string(err_off) + ": " +
                reinterpret_cast<const char*>(msg));
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

std::unique_ptr<Regex::Scratch> Regex::acquire() const {
  {
    std::lock_guard lock(pool_mutex_);
    if (!pool_.empty()) {
      auto s = std::move(pool_.back());
      pool_.pop_back();
      return s;
    }
  }
  auto s = std::make_unique<Scratch>();
  s->data = pcre2_match_data_create_from_pattern(static_cast<pcre2_code*>(code_), nullptr);
  s->mctx = pcre2_match_context_create(nullptr);
  if (!s->data || !s->mctx) throw Error(where_ + ": out of memory creating regex match data");
  if (jit_) {
    s->stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
    if (!s->stack) throw Error(where_ + ": out of memory creating the regex JIT stack");
    pcre2_jit_stack_assign(s->mctx, nullptr, s->stack);
  }
  return s;
}

void Regex::release(std::unique_ptr<Scratch> s) const {
  std::lock_guard lock(pool_mutex_);
  if (pool_.size() < 64) pool_.push_back(std::move(s));
}

void Regex::find_all(std::string_view text, std::vector<Span>& out) const {
  auto scratch = acquire();
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    const int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), pos, 0, scratch->data, scratch->mctx)
                        : pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, scratch->data,
                                      scratch->mctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      release(std::move(scratch));
      throw Error(where_ + ": regex match failed: " + reinterpret_cast<const char*>(msg));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch->data);
    const size_t b = ov[0], e = ov[1];
    if (e > b) {
      out.emplace_back(b, e);
      pos = e;
    } else {
      // Empty match: step over one code point so the scan always advances.
      if (b >= text.size()) break;
      size_t next = b;
      utf8_next(text, next);
      pos = next;
    }
  }
  release(std::move(scratch));
}

std::string Regex::escape(std::string_view literal) {
  // \Q...\E quotes everything except a literal "\E", which is split out.
  std::string out = "\\Q";
  for (size_t i = 0; i < literal.size(); ++i) {
    if (literal[i] == '\\' && i + 1 < literal.size() && literal[i + 1] == 'E') {
      out += "\\E\\\\\\Q";
    } else {
      out.push_back(literal[i]);
    }
  }
  out += "\\E";
  return out;
}

}  // namespace striker::tok
