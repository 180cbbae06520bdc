#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace striker::tok {

ByteLevelTable::ByteLevelTable() {
  dec_.fill(-1);
  uint32_t next_extra = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    cp_[b] = printable ? static_cast<uint32_t>(b) : next_extra++;
    std::string s;
    utf8_append(s, cp_[b]);
    enc_len_[b] = static_cast<uint8_t>(s.size());
    for (size_t k = 0; k < s.size(); ++k) enc_[b][k] = s[k];
    dec_[cp_[b]] = static_cast<int16_t>(b);
  }
}

void ByteLevelTable::encode_append(std::string_view in, std::string& out) const {
  for (unsigned char b : in) out.append(enc_[b].data(), enc_len_[b]);
}

// The table is immutable and identical for every tokenizer, so one shared constant instance.
const ByteLevelTable& byte_level_table() {
  static const ByteLevelTable table;
  return table;
}

}  // namespace striker::tok
