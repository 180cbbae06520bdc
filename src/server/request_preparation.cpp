// Request preparation shared by the generating routes and the render routes.
#include "server/request_preparation.h"

#include "server/api_error.h"
#include "server/serving_context.h"

namespace striker::server {
namespace {

constexpr size_t kMaxPrompts = 64;

std::vector<int32_t> token_prompt(const nlohmann::json& ids, const RequestLimits& limits) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (const auto& id : ids) {
    if (!id.is_number_integer() && !id.is_number_unsigned()) {
      throw bad_request("`prompt` token lists must contain integers", "prompt");
    }
    const bool in_vocab = id.is_number_unsigned() ? id.get<uint64_t>() < uint64_t(limits.vocab_size)
                                                  : (id.get<int64_t>() >= 0 && id.get<int64_t>() < limits.vocab_size);
    if (!in_vocab) {
      throw bad_request("Token id " + id.dump() + " is out of vocabulary (vocab size " +
                            std::to_string(limits.vocab_size) + ")",
                        "prompt");
    }
    out.push_back(int32_t(id.get<int64_t>()));
  }
  return out;
}

void parse_prompts(const nlohmann::json& body, const ServingContext& ctx, bool add_special_tokens,
                   PreparedCompletion& parsed) {
  auto it = body.find("prompt");
  if (it == body.end() || it->is_null()) throw bad_request("`prompt` is required", "prompt");
  const auto& p = *it;
  auto& prompts = parsed.prompts;
  auto add_text = [&](const std::string& text) {
    prompts.push_back(ctx.tokenizer.encode(text, add_special_tokens));
    parsed.texts.push_back(text);
  };
  auto add_ids = [&](const nlohmann::json& ids) {
    prompts.push_back(token_prompt(ids, ctx.options.limits));
    parsed.texts.push_back(ctx.tokenizer.decode(prompts.back()));
  };
  if (p.is_string()) {
    add_text(p.get<std::string>());
  } else if (p.is_array()) {
    if (p.empty()) throw bad_request("`prompt` must not be empty", "prompt");
    if (p.size() > kMaxPrompts && !p[0].is_number()) {
      throw bad_request("at most " + std::to_string(kMaxPrompts) + " prompts per request", "prompt");
    }
    if (p[0].is_number()) {
      add_ids(p);
    } else {
      for (const auto& item : p) {
        if (item.is_string()) add_text(item.get<std::string>());
        else if (item.is_array()) add_ids(item);
        else throw bad_request("`prompt` must be a string, a list of strings, or token ids", "prompt");
      }
    }
  } else {
    throw bad_request("`prompt` must be a string, a list of strings, or token ids", "prompt");
  }
  for (const auto& toks : prompts) {
    if (toks.empty()) throw bad_request("`prompt` must not be empty", "prompt");
  }
}

}  // namespace

PreparedChat prepare_chat_request(const ServingContext& ctx, const RequestBody& request) {
  const nlohmann::json& body = request.fields;
  check_model_name(body, ctx.options);
  if (!ctx.chat_template) throw bad_request("this model has no chat template; use /v1/completions");
  PreparedChat out;
  out.prompt = build_chat_prompt(request, ctx.options, *ctx.chat_template, ctx.tokenizer);
  out.sampling = parse_sampling_request(body, ApiKind::Chat, ctx.options.sampling_defaults, ctx.options.limits);
  resolve_max_tokens(out.sampling, int64_t(out.prompt.tokens.size()), ctx.options.max_model_len);
  return out;
}

PreparedCompletion prepare_completion_request(const ServingContext& ctx, const RequestBody& request) {
  const nlohmann::json& body = request.fields;
  check_model_name(body, ctx.options);
  PreparedCompletion out;
  out.sampling = parse_sampling_request(body, ApiKind::Completion, ctx.options.sampling_defaults, ctx.options.limits);
  auto ast = body.find("add_special_tokens");
  if (ast != body.end() && !ast->is_null() && !ast->is_boolean()) {
    throw bad_request("`add_special_tokens` must be a boolean", "add_special_tokens");
  }
  const bool add_special = ast != body.end() && ast->is_boolean() ? ast->get<bool>() : true;
  parse_prompts(body, ctx, add_special, out);
  return out;
}

std::vector<SamplingParams> per_prompt_params(const SamplingRequest& sampling,
                                              const std::vector<std::vector<int32_t>>& prompts,
                                              int64_t max_model_len) {
  std::vector<SamplingParams> out;
  for (const auto& p : prompts) {
    SamplingRequest copy = sampling;
    resolve_max_tokens(copy, int64_t(p.size()), max_model_len);
    out.push_back(copy.params);
  }
  return out;
}

}  // namespace striker::server
