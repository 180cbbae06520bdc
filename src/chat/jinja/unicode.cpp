#include "chat/jinja/unicode.h"

#include <clocale>
#include <cwctype>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace striker::jinja {
namespace {

// glibc's C.UTF-8 locale carries the Unicode case and class tables; a locale object
// (not the process-wide setlocale) keeps this free of global state.
locale_t unicode_locale() {
  static const locale_t loc = [] {
    locale_t l = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(0));
    return l;
  }();
  return loc;
}

}  // namespace

std::u32string utf8_decode(std::string_view s, const char* what) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out.push_back(c);
      ++i;
      continue;
    }
    int len = (c >= 0xF0 && c <= 0xF4) ? 4 : (c >= 0xE0) && c < 0xF0 ? 3 : (c >= 0xC2 && c < 0xE0) ? 2 : 0;
    if (len == 0 || i + len > s.size())
      throw Error(std::string(what) + ": invalid UTF-8 at byte " + std::to_string(i));
    char32_t cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (int k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) throw Error(std::string(what) + ": invalid UTF-8 at byte " + std::to_string(i));
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) || (cp >= 0xD800 && cp <= 0xDFFF))
      throw Error(std::string(what) + ": invalid UTF-8 at byte " + std::to_string(i));
    out.push_back(cp);
    i += len;
  }
  return out;
}

// One UTF-8 encoder for the project: the tokenizer's.
void utf8_append(std::string& out, char32_t cp) { tok::utf8_append(out, uint32_t(cp)); }

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

bool is_ascii(std::string_view s) {
  for (char c : s)
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  return true;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

bool py_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool py_isalpha(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return unicode_locale() && iswalpha_l(static_cast<wint_t>(c), unicode_locale());
}
bool py_isdigit(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  return unicode_locale() && iswdigit_l(static_cast<wint_t>(c), unicode_locale());
}
bool py_isalnum(char32_t c) { return py_isalpha(c) || py_isdigit(c); }
bool py_islower(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z';
  return unicode_locale() && iswlower_l(static_cast<wint_t>(c), unicode_locale());
}
bool py_isupper(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  return unicode_locale() && iswupper_l(static_cast<wint_t>(c), unicode_locale());
}
char32_t py_toupper(char32_t c) {
  if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
  if (!unicode_locale()) return c;
  return static_cast<char32_t>(towupper_l(static_cast<wint_t>(c), unicode_locale()));
}
char32_t py_tolower(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (!unicode_locale()) return c;
  return static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), unicode_locale()));
}

void append_upper(std::string& out, char32_t c) {
  if (c == 0xDF) {
    out += "SS";
    return;
  }
  utf8_append(out, py_toupper(c));
}

void append_title(std::string& out, char32_t c) {
  if (c == 0xDF) {
    out += "Ss";
    return;
  }
  utf8_append(out, py_toupper(c));
}

std::string py_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (char c : s) out.push_back((c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c);
    return out;
  }
  for (char32_t c : utf8_decode(s)) append_upper(out, c);
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (is_ascii(s)) {
    for (char c : s) out.push_back((c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c);
    return out;
  }
  for (char32_t c : utf8_decode(s)) utf8_append(out, py_tolower(c));
  return out;
}

}  // namespace striker::jinja
