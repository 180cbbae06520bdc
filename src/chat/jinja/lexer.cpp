#include "chat/jinja/lexer.h"

#include <cstring>

#include "chat/jinja/unicode.h"
#include "core/error.h"

namespace striker::jinja {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

class Lexer {
 public:
  Lexer(const std::string& src, const std::string& origin) : src_(src), origin_(origin) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src.size(); ++i)
      if (src[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t start = find_tag_start(pos);
      std::string text = src_.substr(pos, start - pos);
      if (start == src_.size()) {
        emit_text(text, pos);
        break;
      }
      char kind = src_[start + 1];
      char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (sign != '-' && sign != '+') sign = '\0';
      // Whitespace control before the tag.
      if (sign == '-') {
        size_t end = text.size();
        while (end > 0 && is_ws(text[end - 1])) --end;
        text.resize(end);
      } else if (sign != '+' && kind != '{') {
        size_t l_pos = text.rfind('\n');
        l_pos = (l_pos == std::string::npos) ? 0 : l_pos + 1;
        if (l_pos > 0 || line_starting) {
          bool only_blank = l_pos < text.size();
          for (size_t i = l_pos; i < text.size(); ++i)
            if (text[i] != ' ' && text[i] != '\t') only_blank = false;
          if (only_blank) text.resize(l_pos);
        }
      }
      emit_text(text, pos);
      size_t inner = start + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        pos = lex_comment(start, inner, line_starting);
      } else if (kind == '%' && is_raw_begin(inner)) {
        pos = lex_raw(start, line_starting);
      } else {
        pos = lex_tag(start, inner, kind, line_starting);
      }
    }
    tokens_.push_back(make(Tok::Eof, "", src_.size()));
    return std::move(tokens_);
  }

 private:
  const std::string& src_;
  const std::string& origin_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;

  [[noreturn]] void fail(size_t offset, const std::string& msg) const {
    auto [line, col] = line_col(offset);
    throw Error(origin_ + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + msg);
  }

  std::pair<int, int> line_col(size_t offset) const {
    size_t lo = 0, hi = line_starts_.size();
    while (hi - lo > 1) {
      size_t mid = (lo + hi) / 2;
      if (line_starts_[mid] <= offset) lo = mid;
      else hi = mid;
    }
    return {static_cast<int>(lo + 1), static_cast<int>(offset - line_starts_[lo] + 1)};
  }

  Token make(Tok type, std::string text, size_t offset) const {
    Token t;
    t.type = type;
    t.text = std::move(text);
    auto [line, col] = line_col(offset);
    t.line = line;
    t.col = col;
    return t;
  }

  void emit_text(const std::string& text, size_t offset) {
    if (!text.empty()) tokens_.push_back(make(Tok::Text, text, offset));
  }

  size_t find_tag_start(size_t pos) const {
    for (size_t i = pos; i + 1 < src_.size(); ++i)
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    return src_.size();
  }

  // After an end marker: `-` strips all following whitespace; trim_blocks drops one newline
  // after block and comment tags unless the marker is `+`.
  size_t after_end(size_t pos, char sign, bool trim_newline, bool& line_starting) const {
    if (sign == '-') {
      while (pos < src_.size() && is_ws(src_[pos])) ++pos;
      line_starting = pos > 0 && src_[pos - 1] == '\n';
      return pos;
    }
    if (trim_newline && sign != '+' && pos < src_.size() && src_[pos] == '\n') {
      line_starting = true;
      return pos + 1;
    }
    line_starting = src_[pos - 1] == '\n';
    return pos;
  }

  size_t lex_comment(size_t start, size_t inner, bool& line_starting) {
    // jinja2 quirk kept for parity: a `{#` (or `{#-`) that ends the template is accepted.
    if (inner >= src_.size()) return src_.size();
    size_t end = src_.find("#}", inner);
    if (end == std::string::npos) fail(start, "missing end of comment tag");
    char sign = '\0';
    if (end > inner && (src_[end - 1] == '-' || src_[end - 1] == '+')) sign = src_[end - 1];
    return after_end(end + 2, sign, true, line_starting);
  }

  bool match_word(size_t& p, const char* word) const {
    while (p < src_.size() && is_ws(src_[p])) ++p;
    size_t n = std::strlen(word);
    if (src_.compare(p, n, word) != 0) return false;
    size_t q = p + n;
    if (q < src_.size() && (isalnum(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) return false;
    p = q;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    return true;
  }

  bool is_raw_begin(size_t inner) const {
    size_t p = inner;
    if (!match_word(p, "raw")) return false;
    return src_.compare(p, 2, "%}") == 0 || src_.compare(p, 3, "-%}") == 0;
  }

  size_t lex_raw(size_t start, bool& line_starting) {
    size_t p = src_.find("raw", start) + 3;
    while (is_ws(src_[p])) ++p;
    size_t body = p;
    if (src_[p] == '-') {
      body = p + 3;
      while (body < src_.size() && is_ws(src_[body])) ++body;
    } else {
      body = p + 2;
    }
    // Find `{%[-+]? endraw [-+]?%}`.
    for (size_t s = src_.find("{%", body); s != std::string::npos; s = src_.find("{%", s + 2)) {
      size_t q = s + 2;
      char open_sign = (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ? src_[q] : '\0';
      if (open_sign) ++q;
      if (!match_word(q, "endraw")) continue;
      char close_sign = (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) ? src_[q] : '\0';
      if (close_sign) ++q;
      if (src_.compare(q, 2, "%}") != 0) continue;
      std::string text = src_.substr(body, s - body);
      if (open_sign == '-') {
        size_t e = text.size();
        while (e > 0 && is_ws(text[e - 1])) --e;
        text.resize(e);
      }
      emit_text(text, body);
      return after_end(q + 2, close_sign, true, line_starting);
    }
    fail(start, "missing end of raw directive");
  }

  size_t lex_tag(size_t start, size_t pos, char kind, bool& line_starting) {
    tokens_.push_back(make(kind == '{' ? Tok::VarBegin : Tok::BlockBegin, kind == '{' ? "{{" : "{%", start));
    int depth = 0;
    while (true) {
      while (pos < src_.size() && is_ws(src_[pos])) ++pos;
      if (pos >= src_.size()) fail(start, kind == '{' ? "unexpected end of template, expected '}}'" :
                                                       "unexpected end of template, expected '%}'");
      if (depth == 0) {
        char closer = kind == '{' ? '}' : '%';
        size_t p = pos;
        char sign = '\0';
        if ((src_[p] == '-' || (src_[p] == '+' && kind == '%')) && p + 1 < src_.size() && src_[p + 1] == closer &&
            p + 2 < src_.size() && src_[p + 2] == '}') {
          sign = src_[p];
          ++p;
        }
        if (src_[p] == closer && p + 1 < src_.size() && src_[p + 1] == '}') {
          tokens_.push_back(make(kind == '{' ? Tok::VarEnd : Tok::BlockEnd, "", pos));
          return after_end(p + 2, sign, kind == '%', line_starting);
        }
      }
      pos = lex_expr_token(pos, depth);
    }
  }

  size_t lex_expr_token(size_t pos, int& depth) {
    char c = src_[pos];
    // Python identifiers may be non-ASCII (jinja2 accepts them); any UTF-8 byte counts here.
    auto name_start = [](char ch) { return isalpha(static_cast<unsigned char>(ch)) || ch == '_' || (ch & 0x80); };
    if (name_start(c)) {
      size_t e = pos;
      while (e < src_.size() && (name_start(src_[e]) || isdigit(static_cast<unsigned char>(src_[e])))) ++e;
      tokens_.push_back(make(Tok::Name, src_.substr(pos, e - pos), pos));
      return e;
    }
    if (isdigit(static_cast<unsigned char>(c))) return lex_number(pos);
    if (c == '\'' || c == '"') return lex_string(pos);
    static const char* two_char_ops[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : two_char_ops)
      if (src_.compare(pos, 2, op) == 0) {
        tokens_.push_back(make(Tok::Op, op, pos));
        return pos + 2;
      }
    if (std::strchr("+-*/%~<>=.,:|()[]{}", c) && c != '\0') {
      if (c == '(' || c == '[' || c == '{') ++depth;
      if (c == ')' || c == ']' || c == '}') {
        if (depth == 0) fail(pos, std::string("unexpected '") + c + "'");
        --depth;
      }
      tokens_.push_back(make(Tok::Op, std::string(1, c), pos));
      return pos + 1;
    }
    fail(pos, std::string("unexpected char '") + c + "'");
  }

  size_t lex_digits(size_t p) const {
    // \d+(_\d+)*
    while (p < src_.size() && isdigit(static_cast<unsigned char>(src_[p]))) ++p;
    while (p + 1 < src_.size() && src_[p] == '_' && isdigit(static_cast<unsigned char>(src_[p + 1]))) {
      ++p;
      while (p < src_.size() && isdigit(static_cast<unsigned char>(src_[p]))) ++p;
    }
    return p;
  }

  size_t lex_number(size_t pos) {
    size_t e = lex_digits(pos);
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      e = lex_digits(e + 1);
      is_float = true;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t q = e + 1;
      if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < src_.size() && isdigit(static_cast<unsigned char>(src_[q]))) {
        e = lex_digits(q);
        is_float = true;
      }
    }
    std::string digits;
    for (size_t i = pos; i < e; ++i)
      if (src_[i] != '_') digits.push_back(src_[i]);
    Token t = make(is_float ? Tok::Float : Tok::Int, digits, pos);
    try {
      if (is_float) t.float_value = std::stod(digits);
      else t.int_value = std::stoll(digits);
    } catch (const std::exception&) {
      fail(pos, "number literal out of range: " + digits);
    }
    tokens_.push_back(std::move(t));
    return e;
  }

  // Python "unicode-escape" decoding of the literal body, as jinja2 does.
  size_t lex_string(size_t pos) {
    char quote = src_[pos];
    std::string out;
    size_t p = pos + 1;
    while (true) {
      if (p >= src_.size()) fail(pos, "unexpected end of string literal");
      char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        out.push_back(c);
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) fail(pos, "unexpected end of string literal");
      char e = src_[p + 1];
      p += 2;
      switch (e) {
        case '\n': break;
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x':
        case 'u':
        case 'U': {
          int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (p + n > src_.size()) fail(p - 2, "truncated \\" + std::string(1, e) + " escape");
          uint32_t cp = 0;
          for (int i = 0; i < n; ++i) {
            char h = src_[p + i];
            if (!isxdigit(static_cast<unsigned char>(h))) fail(p - 2, "truncated \\" + std::string(1, e) + " escape");
            cp = cp * 16 + (isdigit(static_cast<unsigned char>(h)) ? h - '0' : (tolower(h) - 'a' + 10));
          }
          if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail(p - 2, "invalid code point in escape");
          utf8_append(out, cp);
          p += n;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = e - '0';
            for (int i = 0; i < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++i, ++p)
              cp = cp * 8 + (src_[p] - '0');
            utf8_append(out, cp);
          } else if (e == 'N') {
            fail(p - 2, "\\N{...} escapes are not supported");
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    tokens_.push_back(make(Tok::String, out, pos));
    return p + 1;
  }
};

}  // namespace

std::string normalize_template_source(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\r') {
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
      out.push_back('\n');
    } else if (c == '\v' || c == '\f' || c == 0x1C || c == 0x1D || c == 0x1E) {
      out.push_back('\n');  // str.splitlines() treats these as line breaks too
    } else if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x85) {
      out.push_back('\n');
      ++i;
    } else if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(s[i + 2]) == 0xA8 || static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
      out.push_back('\n');
      i += 2;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

std::vector<Token> tokenize_template(const std::string& source, const std::string& origin) {
  return Lexer(source, origin).run();
}

}  // namespace striker::jinja
