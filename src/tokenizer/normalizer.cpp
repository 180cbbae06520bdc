#include "tokenizer/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/casemap.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>

#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace striker::tok {
namespace {

bool is_ascii(const std::string& s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

class UnicodeNormalizer : public Normalizer {
 public:
  UnicodeNormalizer(const JsonRef& j, const std::string& form) : form_(form) {
    UErrorCode err = U_ZERO_ERROR;
    if (form == "NFC") impl_ = icu::Normalizer2::getNFCInstance(err);
    else if (form == "NFD") impl_ = icu::Normalizer2::getNFDInstance(err);
    else if (form == "NFKC") impl_ = icu::Normalizer2::getNFKCInstance(err);
    else impl_ = icu::Normalizer2::getNFKDInstance(err);
    if (U_FAILURE(err) || !impl_) j.fail("ICU has no " + form + " normalizer: " + u_errorName(err));
  }
  void normalize(std::string& text) const override {
    if (is_ascii(text)) return;  // ASCII is invariant under all four forms
    UErrorCode err = U_ZERO_ERROR;
    if (impl_->isNormalizedUTF8(text, err) && U_SUCCESS(err)) return;
    err = U_ZERO_ERROR;
    std::string out;
    out.reserve(text.size() + 8);
    icu::StringByteSink<std::string> sink(&out);
    impl_->normalizeUTF8(0, text, sink, nullptr, err);
    if (U_FAILURE(err)) throw Error(form_ + " normalization failed: " + u_errorName(err));
    text.swap(out);
  }

 private:
  std::string form_;
  const icu::Normalizer2* impl_ = nullptr;
};

class LowercaseNormalizer : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    if (is_ascii(text)) {
      for (char& c : text)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      return;
    }
    UErrorCode err = U_ZERO_ERROR;
    std::string out;
    icu::StringByteSink<std::string> sink(&out);
    icu::CaseMap::utf8ToLower("", 0, text, sink, nullptr, err);
    if (U_FAILURE(err)) throw Error(std::string("lowercase normalization failed: ") + u_errorName(err));
    text.swap(out);
  }
};

class StripNormalizer : public Normalizer {
 public:
  StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    size_t b = 0, e = text.size();
    if (left_) {
      while (b < e) {
        size_t i = b;
        if (!u_isUWhiteSpace(static_cast<UChar32>(utf8_next(text, i)))) break;
        b = i;
      }
    }
    if (right_) {
      while (e > b) {
        size_t start = e - 1;
        while (start > b && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
        size_t i = start;
        if (!u_isUWhiteSpace(static_cast<UChar32>(utf8_next(text, i)))) break;
        e = start;
      }
    }
    text = text.substr(b, e - b);
  }

 private:
  bool left_, right_;
};

// Replace every match of a literal or regex pattern with `content`.
class ReplaceNormalizer : public Normalizer {
 public:
  explicit ReplaceNormalizer(const JsonRef& j) : content_(j.at("content").str()) {
    const JsonRef pat = j.at("pattern");
    if (pat.has("String")) {
      regex_ = std::make_unique<Regex>(Regex::escape(pat.at("String").str()), pat.file + ": " + pat.path);
    } else if (pat.has("Regex")) {
      regex_ = std::make_unique<Regex>(pat.at("Regex").str(), pat.file + ": " + pat.path + "/Regex");
    } else {
      pat.fail("expected {\"String\": ...} or {\"Regex\": ...}");
    }
  }
  void normalize(std::string& text) const override {
    std::vector<Span> matches;
    regex_->find_all(text, matches);
    if (matches.empty()) return;
    std::string out;
    size_t prev = 0;
    for (auto [b, e] : matches) {
      out.append(text, prev, b - prev);
      out += content_;
      prev = e;
    }
    out.append(text, prev);
    text.swap(out);
  }

 private:
  std::string content_;
  std::unique_ptr<Regex> regex_;
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(std::string& text) const override {
    for (const auto& s : steps_) s->normalize(text);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const JsonRef& j) {
  if (j.value.is_null()) return nullptr;
  const std::string type = j.type();
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD")
    return std::make_unique<UnicodeNormalizer>(j, type);
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Strip") return std::make_unique<StripNormalizer>(j.bool_or("strip_left", true), j.bool_or("strip_right", true));
  if (type == "Replace") return std::make_unique<ReplaceNormalizer>(j);
  if (type == "Prepend") return std::make_unique<PrependNormalizer>(j.at("prepend").str());
  if (type == "Sequence") {
    const JsonRef list = j.at("normalizers");
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < list.array_size(); ++i) {
      auto step = make_normalizer(list.at(i));
      if (step) steps.push_back(std::move(step));
    }
    return std::make_unique<SequenceNormalizer>(std::move(steps));
  }
  j.unsupported("normalizer");
}

}  // namespace striker::tok
