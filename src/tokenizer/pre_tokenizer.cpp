#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/regex.h"

namespace striker::tok {
namespace {

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const JsonRef& j) {
  const std::string b = j.str();
  if (b == "Removed") return Behavior::Removed;
  if (b == "Isolated") return Behavior::Isolated;
  if (b == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::MergedWithNext;
  if (b == "Contiguous") return Behavior::Contiguous;
  j.fail("unknown split behavior '" + b + "'");
}

struct Part {
  Span span;
  bool is_match;
};

// Splits `text` at the matches of `re` the way Hugging Face's NormalizedString::split does:
// the matches and the gaps between them form a cover of the text, then `behavior` decides
// which parts are dropped or glued to a neighbour.
void split_by_regex(const Regex& re, Behavior behavior, bool invert, const Piece& piece, std::vector<Piece>& out) {
  const std::string& text = piece.text;
  std::vector<Span> matches;
  re.find_all(text, matches);
  std::vector<Part> parts;
  parts.reserve(matches.size() * 2 + 1);
  size_t prev = 0;
  for (auto [b, e] : matches) {
    if (prev != b) parts.push_back({{prev, b}, false});
    parts.push_back({{b, e}, true});
    prev = e;
  }
  if (prev != text.size()) parts.push_back({{prev, text.size()}, false});
  if (invert)
    for (auto& p : parts) p.is_match = !p.is_match;

  std::vector<Span> kept;
  kept.reserve(parts.size());
  switch (behavior) {
    case Behavior::Isolated:
      for (const auto& p : parts) kept.push_back(p.span);
      break;
    case Behavior::Removed:
      for (const auto& p : parts)
        if (!p.is_match) kept.push_back(p.span);
      break;
    case Behavior::Contiguous: {
      bool previous_match = false;
      for (const auto& p : parts) {
        if (p.is_match == previous_match && !kept.empty()) kept.back().second = p.span.second;
        else kept.push_back(p.span);
        previous_match = p.is_match;
      }
      break;
    }
    case Behavior::MergedWithPrevious: {
      bool previous_match = false;
      for (const auto& p : parts) {
        if (p.is_match && !previous_match && !kept.empty()) kept.back().second = p.span.second;
        else kept.push_back(p.span);
        previous_match = p.is_match;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      bool previous_match = false;
      for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        if (it->is_match && !previous_match && !kept.empty()) kept.back().first = it->span.first;
        else kept.push_back(it->span);
        previous_match = it->is_match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    }
  }
  for (auto [b, e] : kept)
    if (e > b) out.push_back(Piece{text.substr(b, e - b), piece.at_text_start && b == 0});
}

class SplitPreTokenizer : public PreTokenizer {
 public:
  explicit SplitPreTokenizer(const JsonRef& j)
      : behavior_(parse_behavior(j.at("behavior"))), invert_(j.bool_or("invert", false)) {
    const JsonRef pat = j.at("pattern");
    if (pat.has("String")) {
      regex_ = std::make_unique<Regex>(Regex::escape(pat.at("String").str()), pat.file + ": " + pat.path);
    } else if (pat.has("Regex")) {
      regex_ = std::make_unique<Regex>(pat.at("Regex").str(), pat.file + ": " + pat.path + "/Regex");
    } else {
      pat.fail("expected {\"String\": ...} or {\"Regex\": ...}");
    }
  }
  SplitPreTokenizer(std::unique_ptr<Regex> re, Behavior b, bool invert)
      : regex_(std::move(re)), behavior_(b), invert_(invert) {}

  void pre_tokenize(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    out.reserve(pieces.size() * 4);
    for (const auto& p : pieces) split_by_regex(*regex_, behavior_, invert_, p, out);
    pieces.swap(out);
  }

 private:
  std::unique_ptr<Regex> regex_;
  Behavior behavior_;
  bool invert_;
};

// The GPT-2 split used by ByteLevel when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  explicit ByteLevelPreTokenizer(const JsonRef& j)
      : add_prefix_space_(j.bool_or("add_prefix_space", true)) {
    if (j.bool_or("use_regex", true))
      regex_ = std::make_unique<Regex>(kGpt2Pattern, j.file + ": " + j.path + " (ByteLevel regex)");
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    std::vector<Piece> split;
    split.reserve(pieces.size() * 4);
    for (auto& p : pieces) {
      if (add_prefix_space_ && !p.text.starts_with(' ')) p.text.insert(0, " ");
      if (regex_) split_by_regex(*regex_, Behavior::Isolated, false, p, split);
      else if (!p.text.empty()) split.push_back(std::move(p));
    }
    const ByteLevelTable& table = byte_level_table();
    for (auto& s : split) {
      std::string mapped;
      mapped.reserve(s.text.size() * 2);
      table.encode_append(s.text, mapped);
      s.text.swap(mapped);
    }
    pieces.swap(split);
  }

 private:
  bool add_prefix_space_;
  std::unique_ptr<Regex> regex_;
};

enum class PrependScheme { Always, First, Never };

PrependScheme parse_prepend_scheme(const JsonRef& j) {
  if (!j.has("prepend_scheme")) return j.bool_or("add_prefix_space", true) ? PrependScheme::Always : PrependScheme::Never;
  const JsonRef s = j.at("prepend_scheme");
  if (s.str() == "always") return PrependScheme::Always;
  if (s.str() == "first") return PrependScheme::First;
  if (s.str() == "never") return PrependScheme::Never;
  s.fail("unknown prepend_scheme '" + s.str() + "'");
}

// SentencePiece-style: spaces become the replacement character (U+2581 by default), which is
// prepended per prepend_scheme; with split, every replacement character starts a new piece.
class MetaspacePreTokenizer : public PreTokenizer {
 public:
  explicit MetaspacePreTokenizer(const JsonRef& j)
      : replacement_(j.str_or("replacement", "\u2581")), scheme_(parse_prepend_scheme(j)), split_(j.bool_or("split", true)) {
    if (replacement_.empty()) j.at("replacement").fail("expected one character");
    split_regex_ = std::make_unique<Regex>(Regex::escape(replacement_), j.file + ": " + j.path + "/replacement");
  }
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    std::vector<Piece> out;
    out.reserve(pieces.size() * 4);
    for (auto& p : pieces) {
      std::string replaced;
      replaced.reserve(p.text.size() + replacement_.size());
      for (char c : p.text) {
        if (c == ' ') replaced += replacement_;
        else replaced.push_back(c);
      }
      const bool prepend = scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && p.at_text_start);
      if (prepend && !replaced.starts_with(replacement_)) replaced.insert(0, replacement_);
      p.text.swap(replaced);
      if (split_) split_by_regex(*split_regex_, Behavior::MergedWithNext, false, p, out);
      else if (!p.text.empty()) out.push_back(std::move(p));
    }
    pieces.swap(out);
  }

 private:
  std::string replacement_;
  PrependScheme scheme_;
  bool split_;
  std::unique_ptr<Regex> split_regex_;
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<Piece>& pieces) const override {
    for (const auto& s : steps_) s->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

std::unique_ptr<PreTokenizer> regex_split(const std::string& pattern, Behavior b, bool invert,
                                          const JsonRef& j) {
  return std::make_unique<SplitPreTokenizer>(std::make_unique<Regex>(pattern, j.file + ": " + j.path), b,
                                             invert);
}

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const JsonRef& j) {
  if (j.value.is_null()) return nullptr;
  const std::string type = j.type();
  if (type == "Split") return std::make_unique<SplitPreTokenizer>(j);
  if (type == "ByteLevel") return std::make_unique<ByteLevelPreTokenizer>(j);
  if (type == "Metaspace") return std::make_unique<MetaspacePreTokenizer>(j);
  if (type == "Digits") {
    return j.bool_or("individual_digits", false) ? regex_split(R"(\p{N})", Behavior::Isolated, false, j)
                                                 : regex_split(R"(\p{N}+)", Behavior::Isolated, false, j);
  }
  if (type == "Whitespace") {
    // Word characters here follow Rust's \w (it keeps U+200D inside words), not Oniguruma's.
    return regex_split(R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}]+|[^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}\s]+)",
                       Behavior::Removed, true, j);
  }
  if (type == "WhitespaceSplit") return regex_split(R"(\s+)", Behavior::Removed, false, j);
  if (type == "Sequence") {
    const JsonRef list = j.at("pretokenizers");
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list.array_size(); ++i) {
      auto step = make_pre_tokenizer(list.at(i));
      if (step) steps.push_back(std::move(step));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  j.unsupported("pre-tokenizer");
}

}  // namespace striker::tok
