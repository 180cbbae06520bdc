// The GPT-2 byte <-> printable-character table used by the ByteLevel pre-tokenizer and decoder:
// bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF map to themselves, the other 68 bytes to U+0100...
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace striker::tok {

class ByteLevelTable {
 public:
  ByteLevelTable();
  // UTF-8 of the character that stands for byte b.
  std::string_view encoded(uint8_t b) const { return {enc_[b].data(), enc_len_[b]}; }
  uint32_t code_point(uint8_t b) const { return cp_[b]; }
  // The byte a character stands for, or -1 when the character is not in the table.
  int byte_of(uint32_t cp) const { return cp < dec_.size() ? dec_[cp] : -1; }

  // Maps every byte of `in` to its character and appends the UTF-8 to `out`.
  void encode_append(std::string_view in, std::string& out) const;

 private:
  std::array<std::array<char, 2>, 256> enc_{};
  std::array<uint8_t, 256> enc_len_{};
  std::array<uint32_t, 256> cp_{};
  std::array<int16_t, 324> dec_{};
};

const ByteLevelTable& byte_level_table();

}  // namespace striker::tok
