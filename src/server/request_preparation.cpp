// Request preparation shared by the generating routes and the render routes.
#include "server/request_preparation.h"

#include <limits>
#include <optional>

#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/serving_context.h"
#include "server/structured_request.h"

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

// vLLM's `truncate_prompt_tokens`: keep only a prompt's last k tokens (its left side goes), -1 for
// the model's maximum length; above that is a 400 with vLLM's message. 0 would keep nothing (vLLM's
// slice [-0:] would keep everything): refused, naming the field.
std::optional<int64_t> prompt_truncation(const nlohmann::json& body, int64_t max_model_len) {
  const auto k = JsonFields(body).integer("truncate_prompt_tokens", -1, std::numeric_limits<int64_t>::max());
  if (!k) return std::nullopt;
  if (*k == -1) return max_model_len;
  if (*k == 0)
    throw bad_request("`truncate_prompt_tokens` must be -1 (the model's maximum length) or at least 1, got 0",
                      "truncate_prompt_tokens");
  if (*k > max_model_len)
    throw bad_request("truncate_prompt_tokens value is greater than max_model_len. Please, select a smaller "
                      "truncation size.",
                      "truncate_prompt_tokens");
  return k;
}

void keep_last(std::vector<int32_t>& tokens, std::optional<int64_t> keep) {
  if (keep && int64_t(tokens.size()) > *keep) tokens.erase(tokens.begin(), tokens.end() - *keep);
}

}  // namespace

PreparedChat prepare_chat_request(const ServingContext& ctx, const RequestBody& request) {
  const nlohmann::json& body = request.fields;
  check_model_name(body, ctx.options);
  if (!ctx.chat_template) throw bad_request("this model has no chat template; use /v1/completions");
  PreparedChat out;
  const auto truncation = prompt_truncation(body, ctx.options.max_model_len);
  out.prompt = build_chat_prompt(request, ctx.options, *ctx.chat_template, ctx.tokenizer);
  keep_last(out.prompt.tokens, truncation);
  out.sampling = parse_sampling_request(body, ApiKind::Chat, ctx.options.sampling_defaults, ctx.options.limits);
  if (ctx.options.return_tokens_as_token_ids) out.sampling.return_tokens_as_token_ids = true;  // the server's flag
  resolve_max_tokens(out.sampling, int64_t(out.prompt.tokens.size()), ctx.options.max_model_len);
  return out;
}

void constrain_chat_generation(const ServingContext& ctx, const nlohmann::ordered_json& body, const ChatPrompt& prompt,
                               SamplingRequest& sampling) {
  auto structured = parse_structured_request(body);
  if (auto calls = tool_call_request(ctx, prompt, structured.has_value())) structured = std::move(calls);
  const ParserSettings& ps = prompt.parser;
  if (structured) {
    int32_t start_after = -1;
    if (!ps.reasoning_parser.empty() && ps.thinking_enabled && !ps.reasoning_ended_in_prompt)
      start_after = ctx.tokenizer.token_to_id("</think>").value_or(-1);
    sampling.params.structured = compile_structured_request(ctx, *structured, start_after);
  }
  if (!ps.reasoning_parser.empty() || !ps.tool_parser.empty()) sampling.params.skip_special_tokens = false;
}

PreparedCompletion prepare_completion_request(const ServingContext& ctx, const RequestBody& request) {
  const nlohmann::json& body = request.fields;
  check_model_name(body, ctx.options);
  PreparedCompletion out;
  out.sampling = parse_sampling_request(body, ApiKind::Completion, ctx.options.sampling_defaults, ctx.options.limits);
  if (ctx.options.return_tokens_as_token_ids) out.sampling.return_tokens_as_token_ids = true;  // the server's flag
  auto ast = body.find("add_special_tokens");
  if (ast != body.end() && !ast->is_null() && !ast->is_boolean()) {
    throw bad_request("`add_special_tokens` must be a boolean", "add_special_tokens");
  }
  const bool add_special = ast != body.end() && ast->is_boolean() ? ast->get<bool>() : true;
  const auto truncation = prompt_truncation(body, ctx.options.max_model_len);
  parse_prompts(body, ctx, add_special, out);
  // `texts` stay the prompts as sent (what `echo` returns, as vLLM's prompt text does).
  for (auto& p : out.prompts) keep_last(p, truncation);
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
