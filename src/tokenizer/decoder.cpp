#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace striker::tok {
namespace {

// Every token whose characters are all in the byte table becomes those bytes; any other token
// (an added token like "中文") keeps its own UTF-8. The bytes are then decoded lossily.
class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    const ByteLevelTable& table = byte_level_table();
    std::string bytes;
    std::string tok_bytes;
    for (const auto& t : tokens) {
      tok_bytes.clear();
      bool all_mapped = true;
      size_t i = 0;
      while (i < t.size()) {
        const size_t n = utf8_valid_len(t, i);
        if (n == 0) {
          all_mapped = false;
          break;
        }
        const uint32_t cp = utf8_next(t, i);
        const int b = table.byte_of(cp);
        if (b < 0) {
          all_mapped = false;
          break;
        }
        tok_bytes.push_back(static_cast<char>(b));
      }
      bytes += all_mapped ? tok_bytes : t;
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

// Runs of "<0xXX>" tokens become the bytes they name (one U+FFFD per byte when not valid UTF-8).
class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    size_t pending_count = 0;
    auto flush = [&] {
      if (pending_count == 0) return;
      if (utf8_first_invalid(pending) == pending.size()) {
        out.push_back(pending);
      } else {
        for (size_t k = 0; k < pending_count; ++k) out.emplace_back("\xEF\xBF\xBD");
      }
      pending.clear();
      pending_count = 0;
    };
    for (auto& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.starts_with("<0x") && t.ends_with('>')) byte = parse_hex(t[3], t[4]);
      if (byte >= 0) {
        pending.push_back(static_cast<char>(byte));
        ++pending_count;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens.swap(out);
  }

 private:
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int parse_hex(char a, char b) {
    const int h = hex(a), l = hex(b);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, all);
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
class StripDecoder : public Decoder {
 public:
  StripDecoder(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      size_t b = 0, e = t.size();
      for (size_t k = 0; k < start_ && t.compare(b, content_.size(), content_) == 0 && b < e; ++k)
        b += content_.size();
      for (size_t k = 0; k < stop_ && e >= b + content_.size() &&
                         t.compare(e - content_.size(), content_.size(), content_) == 0;
           ++k)
        e -= content_.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class ReplaceDecoder : public Decoder {
 public:
  explicit ReplaceDecoder(const JsonRef& j) : content_(j.at("content").str()) {
    const JsonRef pat = j.at("pattern");
    if (pat.has("String")) {
      regex_ = std::make_unique<Regex>(Regex::escape(pat.at("String").str()), pat.file + ": " + pat.path);
    } else if (pat.has("Regex")) {
      regex_ = std::make_unique<Regex>(pat.at("Regex").str(), pat.file + ": " + pat.path + "/Regex");
    } else {
      pat.fail("expected {\"String\": ...} or {\"Regex\": ...}");
    }
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<Span> m;
    for (auto& t : tokens) {
      if (utf8_first_invalid(t) != t.size()) continue;  // the regex needs valid UTF-8
      m.clear();
      regex_->find_all(t, m);
      if (m.empty()) continue;
      std::string out;
      size_t prev = 0;
      for (auto [b, e] : m) {
        out.append(t, prev, b - prev);
        out += content_;
        prev = e;
      }
      out.append(t, prev);
      t.swap(out);
    }
  }

 private:
  std::string content_;
  std::unique_ptr<Regex> regex_;
};

// Replacement characters become spaces, except in the first token, where Hugging Face drops
// them all unless prepend_scheme is "never".
class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(std::string replacement, bool strip_first)
      : replacement_(std::move(replacement)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::string_view with = (i == 0 && strip_first_) ? std::string_view() : std::string_view(" ");
      std::string out;
      size_t pos = 0;
      const std::string& t = tokens[i];
      while (true) {
        const size_t hit = t.find(replacement_, pos);
        out.append(t, pos, hit == std::string::npos ? std::string::npos : hit - pos);
        if (hit == std::string::npos) break;
        out += with;
        pos = hit + replacement_.size();
      }
      tokens[i].swap(out);
    }
  }

 private:
  std::string replacement_;
  bool strip_first_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& s : steps_) s->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const JsonRef& j) {
  if (j.value.is_null()) return nullptr;
  const std::string type = j.type();
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    const std::string content = j.at("content").str();
    if (content.empty()) j.at("content").fail("expected one character");
    return std::make_unique<StripDecoder>(content, static_cast<size_t>(j.int_or("start", 0)),
                                          static_cast<size_t>(j.int_or("stop", 0)));
  }
  if (type == "Replace") return std::make_unique<ReplaceDecoder>(j);
  if (type == "Metaspace") {
    const std::string rep = j.str_or("replacement", "\u2581");
    if (rep.empty()) j.at("replacement").fail("expected one character");
    bool strip_first = j.bool_or("add_prefix_space", true);
    if (j.has("prepend_scheme")) {
      const std::string scheme = j.at("prepend_scheme").str();
      if (scheme != "always" && scheme != "first" && scheme != "never")
        j.at("prepend_scheme").fail("unknown prepend_scheme '" + scheme + "'");
      strip_first = scheme != "never";
    }
    return std::make_unique<MetaspaceDecoder>(rep, strip_first);
  }
  if (type == "Sequence") {
    const JsonRef list = j.at("decoders");
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < list.array_size(); ++i) {
      auto step = make_decoder(list.at(i));
      if (step) steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceDecoder>(std::move(steps));
  }
  j.unsupported("decoder");
}

}  // namespace striker::tok
