// POST /tokenize (completion form {prompt} or chat form {messages}) and POST /detokenize.
#include <httplib.h>

#include "server/api_error.h"
#include "server/chat_request.h"
#include "server/json_fields.h"
#include "server/serving_context.h"

namespace striker::server {

void handle_tokenize(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const RequestBody request = parse_request_body(req);
  const nlohmann::json& body = request.fields;
  check_model_name(body, ctx.options);
  JsonFields f(body);
  std::vector<int32_t> tokens;
  if (f.has("messages")) {
    if (!ctx.chat_template) throw bad_request("this model has no chat template");
    tokens = build_chat_prompt(request, ctx.options, *ctx.chat_template, ctx.tokenizer).tokens;
  } else {
    auto prompt = f.string("prompt");
    if (!prompt) throw bad_request("`prompt` (a string) or `messages` is required", "prompt");
    tokens = ctx.tokenizer.encode(*prompt, f.boolean("add_special_tokens").value_or(true));
  }
  nlohmann::json out = {{"count", tokens.size()}, {"max_model_len", ctx.options.max_model_len}, {"tokens", tokens},
                        {"token_strs", nullptr}};
  if (f.boolean("return_token_strs").value_or(false)) {
    nlohmann::json strs = nlohmann::json::array();
    for (int32_t id : tokens) strs.push_back(ctx.tokenizer.id_to_token(id).value_or(""));
    out["token_strs"] = strs;
  }
  res.set_content(dump_json(out), "application/json");
}

void handle_detokenize(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const nlohmann::json body = parse_request_body(req).fields;
  check_model_name(body, ctx.options);
  JsonFields f(body);
  const auto* ids = f.array("tokens");
  if (!ids) throw bad_request("`tokens` (an array of token ids) is required", "tokens");
  std::vector<int32_t> tokens;
  for (const auto& id : *ids) {
    const bool ok = (id.is_number_integer() || id.is_number_unsigned()) &&
                    (id.is_number_unsigned() ? id.get<uint64_t>() < uint64_t(ctx.options.limits.vocab_size)
                                             : id.get<int64_t>() >= 0 && id.get<int64_t>() < ctx.options.limits.vocab_size);
    if (!ok) {
      throw bad_request("Token id " + id.dump() + " is out of vocabulary (vocab size " +
                            std::to_string(ctx.options.limits.vocab_size) + ")",
                        "tokens");
    }
    tokens.push_back(int32_t(id.get<int64_t>()));
  }
  res.set_content(dump_json({{"prompt", ctx.tokenizer.decode(tokens, false)}}), "application/json");
}

}  // namespace striker::server
