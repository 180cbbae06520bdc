#include "tokenizer/hf_tokenizer.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include "tokenizer/utf8.h"

namespace striker::tok {
namespace {

Json read_json(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string() + ": cannot open the file");
  std::stringstream buf;
  buf << in.rdbuf();
  try {
    return Json::parse(buf.str());
  } catch (const Json::parse_error& e) {
    throw Error(file.string() + ": invalid JSON at byte " + std::to_string(e.byte) + ": " + e.what());
  }
}

}  // namespace

HfTokenizer::HfTokenizer(const std::filesystem::path& tokenizer_json, const std::filesystem::path& config_json) {
  const Json root = read_json(tokenizer_json);
  const std::string file = tokenizer_json.string();
  const JsonRef r{root, file, ""};
  if (!root.is_object()) r.fail("expected a JSON object");
  if (r.has("version") && r.at("version").str() != "1.0") r.at("version").fail("unknown tokenizer.json version");
  if (r.has("truncation")) r.at("truncation").fail("truncation is not supported (set it to null)");
  if (r.has("padding")) {
    // Padding to the longest sequence of a batch leaves a single encode unchanged; anything
    // that would add pad ids to one sequence is not implemented.
    const JsonRef pad = r.at("padding");
    const bool longest = pad.has("strategy") && pad.at("strategy").value == "BatchLongest";
    if (!longest || pad.has("pad_to_multiple_of")) pad.fail("padding other than BatchLongest is not supported");
  }

  const JsonRef model = r.at("model");
  const std::string model_type = model.has("type") ? model.type() : (model.has("merges") ? "BPE" : "");
  if (model_type != "BPE") {
    if (model.has("type")) model.unsupported("model");
    model.fail("model has no 'type' and is not a BPE model");
  }
  model_ = std::make_unique<BpeModel>(model);
  normalizer_ = make_normalizer(r.has("normalizer") ? r.at("normalizer") : JsonRef{Json(), file, "/normalizer"});
  pre_tokenizer_ =
      make_pre_tokenizer(r.has("pre_tokenizer") ? r.at("pre_tokenizer") : JsonRef{Json(), file, "/pre_tokenizer"});
  post_processor_ = make_post_processor(r.has("post_processor") ? r.at("post_processor")
                                                                 : JsonRef{Json(), file, "/post_processor"});
  decoder_ = make_decoder(r.has("decoder") ? r.at("decoder") : JsonRef{Json(), file, "/decoder"});

  std::vector<AddedToken> tokens =
      r.has("added_tokens") ? load_added_tokens(r.at("added_tokens")) : std::vector<AddedToken>{};
  if (!config_json.empty()) apply_config_overrides(config_json, tokens);
  added_ = AddedVocab(std::move(tokens), normalizer_.get());
}

std::vector<AddedToken> HfTokenizer::load_added_tokens(const JsonRef& list) const {
  std::vector<AddedToken> out;
  const int64_t model_size = model_->max_id() + 1;
  for (size_t i = 0; i < list.array_size(); ++i) {
    const JsonRef t = list.at(i);
    AddedToken a;
    const JsonRef id = t.at("id");
    if (id.integer() < 0 || id.integer() > std::numeric_limits<int32_t>::max() / 2) id.fail("id out of range");
    a.id = static_cast<int32_t>(id.integer());
    a.content = t.at("content").str();
    if (a.content.empty()) t.at("content").fail("an added token cannot be empty");
    a.special = t.bool_or("special", false);
    a.lstrip = t.bool_or("lstrip", false);
    a.rstrip = t.bool_or("rstrip", false);
    a.single_word = t.bool_or("single_word", false);
    a.normalized = t.bool_or("normalized", !a.special);
    // Hugging Face re-derives ids: content already in the model vocab keeps the model id;
    // new content gets the next id after the model vocab. A file that disagrees is rejected.
    if (auto model_id = model_->token_to_id(a.content)) {
      if (*model_id != a.id) id.fail("'" + a.content + "' has id " + std::to_string(*model_id) + " in the model vocab");
    } else if (a.id < model_size) {
      id.fail("id collides with the model vocab (which has " + std::to_string(model_size) + " ids)");
    }
    out.push_back(std::move(a));
  }
  return out;
}

void HfTokenizer::apply_config_overrides(const std::filesystem::path& config_json,
                                         std::vector<AddedToken>& tokens) const {
  const Json root = read_json(config_json);
  const std::string file = config_json.string();
  const JsonRef r{root, file, ""};
  if (!root.is_object()) r.fail("expected a JSON object");
  if (!r.has("added_tokens_decoder")) return;
  const JsonRef dec = r.at("added_tokens_decoder");
  if (!dec.value.is_object()) dec.fail("expected an object of id -> token");
  for (auto it = dec.value.begin(); it != dec.value.end(); ++it) {
    const JsonRef t{it.value(), file, dec.path + "/" + it.key()};
    int32_t id = -1;
    try {
      size_t used = 0;
      id = std::stoi(it.key(), &used);
      if (used != it.key().size()) id = -1;
    } catch (const std::exception&) {
      id = -1;
    }
    if (id < 0) t.fail("the key must be a token id");
    const std::string content = t.at("content").str();
    AddedToken* target = nullptr;
    for (auto& a : tokens)
      if (a.id == id) target = &a;
    if (!target) {
      if (model_->token_to_id(content) != id)
        t.fail("token " + std::to_string(id) + " '" + content + "' is in neither tokenizer.json's added_tokens nor the vocab");
      AddedToken added;
      added.id = id;
      added.content = content;
      added.special = t.bool_or("special", false);
      added.normalized = !added.special;  // Hugging Face's default for a new added token
      tokens.push_back(std::move(added));
      target = &tokens.back();
    } else if (target->content != content) {
      t.at("content").fail("does not match tokenizer.json's added token " + std::to_string(id) + " '" +
                           target->content + "'");
    }
    target->special = t.bool_or("special", target->special);
    target->lstrip = t.bool_or("lstrip", target->lstrip);
    target->rstrip = t.bool_or("rstrip", target->rstrip);
    target->single_word = t.bool_or("single_word", target->single_word);
    target->normalized = t.bool_or("normalized", target->normalized);
  }
}

void HfTokenizer::encode_plain(std::string_view text, bool at_text_start, std::vector<int32_t>& ids) const {
  std::vector<Piece> pieces;
  pieces.push_back(Piece{std::string(text), at_text_start});
  if (pre_tokenizer_) pre_tokenizer_->pre_tokenize(pieces);
  for (const auto& p : pieces) model_->tokenize(p.text, ids);
}

void HfTokenizer::encode_segment(std::string_view text, bool at_text_start, std::vector<int32_t>& ids) const {
  if (!SegmentCache::worth_caching(text)) return encode_plain(text, at_text_start, ids);
  if (segments_.append(text, at_text_start, ids)) return;
  const size_t first = ids.size();
  encode_plain(text, at_text_start, ids);
  segments_.put(text, at_text_start, std::span<const int32_t>(ids).subspan(first));
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const size_t bad = utf8_first_invalid(text);
  if (bad != text.size()) throw Error("text to encode is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<Segment> raw, normalized;
  added_.split(text, /*normalized_set=*/false, raw);
  for (size_t r = 0; r < raw.size(); ++r) {
    Segment& seg = raw[r];
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    if (normalizer_) normalizer_->normalize(seg.text);
    normalized.clear();
    added_.split(seg.text, /*normalized_set=*/true, normalized);
    for (size_t k = 0; k < normalized.size(); ++k) {
      const Segment& n = normalized[k];
      if (n.id >= 0) ids.push_back(n.id);
      else if (!n.text.empty()) encode_segment(n.text, /*at_text_start=*/r == 0 && k == 0, ids);
    }
  }
  if (add_special_tokens && post_processor_) post_processor_->add_special_tokens(ids);
  return ids;
}

std::string HfTokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    // Like Hugging Face: ids with no token are dropped, special ones only on request.
    if (const AddedToken* a = added_.by_id(id)) {
      if (skip_special_tokens && added_.is_special_content(a->shown)) continue;
      tokens.push_back(a->shown);
    } else if (const std::string* t = model_->id_to_token(id)) {
      if (skip_special_tokens && added_.is_special_content(*t)) continue;
      tokens.push_back(*t);
    }
  }
  if (!decoder_) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) joined += ' ';
      joined += tokens[i];
    }
    return joined;
  }
  decoder_->decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

std::optional<int32_t> HfTokenizer::token_to_id(std::string_view token) const {
  if (auto id = added_.id_of(token)) return id;
  return model_->token_to_id(token);
}

std::optional<std::string> HfTokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* a = added_.by_id(id)) return a->shown;
  if (const std::string* t = model_->id_to_token(id)) return *t;
  return std::nullopt;
}

int64_t HfTokenizer::vocab_size() const { return std::max(model_->max_id(), added_.max_id()) + 1; }

bool HfTokenizer::is_special(int32_t id) const {
  const AddedToken* a = added_.by_id(id);
  return a && a->special;
}

}  // namespace striker::tok
