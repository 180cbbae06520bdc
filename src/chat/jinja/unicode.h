// Code-point helpers so that string operations follow Python's str (which indexes,
// slices, strips and changes case by code point, not by byte).
#pragma once
#include <string>
#include <string_view>

namespace striker::jinja {

// Strict UTF-8 decode; throws striker::Error (naming `what`) on malformed input.
std::u32string utf8_decode(std::string_view s, const char* what = "string");
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t cp);
bool is_ascii(std::string_view s);
size_t utf8_length(std::string_view s);  // number of code points (input assumed valid)

bool py_isspace(char32_t c);  // str.isspace / str.split() / str.strip() whitespace
bool py_isalpha(char32_t c);
bool py_isdigit(char32_t c);
bool py_isalnum(char32_t c);
bool py_islower(char32_t c);
bool py_isupper(char32_t c);
char32_t py_toupper(char32_t c);
char32_t py_tolower(char32_t c);

// Appends the upper / title case of one code point (Python's special cases such as
// 'ß' -> "SS" / "Ss" included).
void append_upper(std::string& out, char32_t c);
void append_title(std::string& out, char32_t c);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);

}  // namespace striker::jinja
