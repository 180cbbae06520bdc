#include "tokenizer/post_processor.h"

namespace striker::tok {
namespace {

// A list of pieces: either fixed ids (special tokens) or the encoded sequence itself.
class TemplatePostProcessor : public PostProcessor {
 public:
  struct Item {
    bool is_sequence = false;
    std::vector<int32_t> ids;
  };
  explicit TemplatePostProcessor(std::vector<Item> items) : items_(std::move(items)) {}
  void add_special_tokens(std::vector<int32_t>& ids) const override {
    std::vector<int32_t> out;
    out.reserve(ids.size() + items_.size());
    for (const auto& item : items_) {
      if (item.is_sequence) out.insert(out.end(), ids.begin(), ids.end());
      else out.insert(out.end(), item.ids.begin(), item.ids.end());
    }
    ids.swap(out);
  }

 private:
  std::vector<Item> items_;
};

class NoOpPostProcessor : public PostProcessor {
 public:
  void add_special_tokens(std::vector<int32_t>&) const override {}
};

class SequencePostProcessor : public PostProcessor {
 public:
  explicit SequencePostProcessor(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  void add_special_tokens(std::vector<int32_t>& ids) const override {
    for (const auto& s : steps_) s->add_special_tokens(ids);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

std::unique_ptr<PostProcessor> make_template(const JsonRef& j) {
  const JsonRef single = j.at("single");
  const JsonRef specials = j.at("special_tokens");
  std::vector<TemplatePostProcessor::Item> items;
  for (size_t i = 0; i < single.array_size(); ++i) {
    const JsonRef piece = single.at(i);
    if (piece.has("Sequence")) {
      const JsonRef seq = piece.at("Sequence").at("id");
      if (seq.str() != "A") seq.fail("a single-sequence template can only use sequence 'A'");
      items.push_back({true, {}});
    } else if (piece.has("SpecialToken")) {
      const JsonRef name = piece.at("SpecialToken").at("id");
      if (!specials.has(name.str())) name.fail("special token '" + name.str() + "' is not in special_tokens");
      const JsonRef ids = specials.at(name.str()).at("ids");
      TemplatePostProcessor::Item item;
      for (size_t k = 0; k < ids.array_size(); ++k) item.ids.push_back(static_cast<int32_t>(ids.at(k).integer()));
      items.push_back(std::move(item));
    } else {
      piece.fail("expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
  return std::make_unique<TemplatePostProcessor>(std::move(items));
}

// Bert / Roberta: [cls] A [sep], where cls and sep are ["token", id].
std::unique_ptr<PostProcessor> make_cls_sep(const JsonRef& j) {
  auto id_of = [](const JsonRef& pair) {
    if (pair.array_size() != 2) pair.fail("expected [token, id]");
    return static_cast<int32_t>(pair.at(1).integer());
  };
  std::vector<TemplatePostProcessor::Item> items;
  items.push_back({false, {id_of(j.at("cls"))}});
  items.push_back({true, {}});
  items.push_back({false, {id_of(j.at("sep"))}});
  return std::make_unique<TemplatePostProcessor>(std::move(items));
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const JsonRef& j) {
  if (j.value.is_null()) return nullptr;
  const std::string type = j.type();
  if (type == "TemplateProcessing") return make_template(j);
  if (type == "BertProcessing" || type == "RobertaProcessing") return make_cls_sep(j);
  if (type == "ByteLevel") return std::make_unique<NoOpPostProcessor>();  // only trims offsets
  if (type == "Sequence") {
    const JsonRef list = j.at("processors");
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (size_t i = 0; i < list.array_size(); ++i) {
      auto step = make_post_processor(list.at(i));
      if (step) steps.push_back(std::move(step));
    }
    return std::make_unique<SequencePostProcessor>(std::move(steps));
  }
  j.unsupported("post-processor");
}

}  // namespace striker::tok
