#include "chat/tool_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace striker {

namespace {

// Expected length of a UTF-8 sequence from its lead byte; 0 when the byte cannot lead one.
int utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Whether `second` may follow `lead` (rejects overlong forms and surrogates, as Python does).
bool valid_second_byte(unsigned char lead, unsigned char second) {
  if ((second & 0xC0) != 0x80) return false;
  if (lead == 0xE0) return second >= 0xA0;
  if (lead == 0xED) return second <= 0x9F;
  if (lead == 0xF0) return second >= 0x90;
  if (lead == 0xF4) return second <= 0x8F;
  return true;
}

// Length of the well-formed sequence at text[i], 0 if malformed, -1 if cut short by the end.
int well_formed_at(std::string_view text, size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  const int len = utf8_sequence_length(lead);
  if (len <= 1) return len;
  for (int k = 1; k < len; ++k) {
    if (i + k >= text.size()) return -1;
    const auto b = static_cast<unsigned char>(text[i + k]);
    if (k == 1 ? !valid_second_byte(lead, b) : (b & 0xC0) != 0x80) return 0;
  }
  return len;
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

}  // namespace

std::string utf8_sanitize(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const int len = well_formed_at(text, i);
    if (len > 0) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out.append(kReplacement);
      ++i;
    }
  }
  return out;
}

size_t utf8_complete_prefix(std::string_view text) {
  // A cut sequence can only start in the last three bytes.
  const size_t first = text.size() > 3 ? text.size() - 3 : 0;
  for (size_t i = first; i < text.size(); ++i) {
    if (utf8_sequence_length(static_cast<unsigned char>(text[i])) > 1 && well_formed_at(text, i) == -1) return i;
  }
  return text.size();
}

std::string python_json_string(std::string_view raw) {
  const std::string text = utf8_sanitize(raw);
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  const size_t e_pos = sci.find('e');
  std::string mantissa = sci.substr(0, e_pos);
  const int exponent = std::atoi(sci.c_str() + e_pos + 1);
  std::string sign;
  if (mantissa[0] == '-') {
    sign = "-";
    mantissa.erase(0, 1);
  }
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits.push_back(c);
  }
  if (exponent >= -4 && exponent < 16) {
    std::string out;
    if (exponent >= 0) {
      const size_t int_len = static_cast<size_t>(exponent) + 1;
      if (digits.size() < int_len) digits.append(int_len - digits.size(), '0');
      out = digits.substr(0, int_len) + "." + (digits.size() > int_len ? digits.substr(int_len) : "0");
    } else {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    }
    return sign + out;
  }
  std::string out = digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return sign + out + exp_buf;
}

bool python_is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || (c >= 0x1c && c <= 0x1f);
}

std::string_view python_strip(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end && python_is_space(text[begin])) ++begin;
  while (end > begin && python_is_space(text[end - 1])) --end;
  return text.substr(begin, end - begin);
}

}  // namespace striker
