// UTF-8 helpers the tokenizer needs: validation, code point iteration, and the
// "lossy" decode with the same U+FFFD substitution rule as Rust's String::from_utf8_lossy
// (one replacement per maximal invalid subpart), so decode() matches Hugging Face byte for byte.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace striker::tok {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is invalid or truncated.
size_t utf8_valid_len(std::string_view s, size_t i);

// Byte offset of the first invalid sequence, or s.size() when `s` is valid UTF-8.
size_t utf8_first_invalid(std::string_view s);

// Decodes the code point at s[i] (which must be valid) and advances i past it.
uint32_t utf8_next(std::string_view s, size_t& i);

void utf8_append(std::string& out, uint32_t cp);

// Valid UTF-8 passes through; every maximal invalid subpart becomes U+FFFD.
std::string utf8_lossy(std::string_view bytes);

// True when the text ends with U+FFFD (a sign that the tail is an incomplete sequence).
bool ends_with_replacement_char(std::string_view s);

}  // namespace striker::tok
