// POST /v1/chat/completions/render and POST /v1/completions/render (vLLM's render endpoints):
// the request is validated and its prompt rendered to token ids exactly as the generating route
// would, and nothing runs. vllm-router's kv_aware policy asks them for a request's prompt ids
// (it falls back to /tokenize when they are missing).
#include <httplib.h>

#include "server/render_response.h"
#include "server/request_preparation.h"
#include "server/serving_context.h"

namespace striker::server {

// Answers one GenerateRequest (vLLM: response_model=GenerateRequest).
void handle_chat_completions_render(const ServingContext& ctx, const httplib::Request& req,
                                    httplib::Response& res) {
  const RequestBody request = parse_request_body(req);
  const PreparedChat prepared = prepare_chat_request(ctx, request);
  const nlohmann::json out = generate_request_json("chatcmpl-" + random_hex_id(), prepared.prompt.tokens,
                                                   prepared.sampling, prepared.sampling.params, request.fields);
  res.set_content(dump_json(out), "application/json");
}

// Answers a list of GenerateRequest, one per prompt (vLLM: response_model=list[GenerateRequest]).
void handle_completions_render(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const RequestBody request = parse_request_body(req);
  const PreparedCompletion prepared = prepare_completion_request(ctx, request);
  const auto per_prompt = per_prompt_params(prepared.sampling, prepared.prompts, ctx.options.max_model_len);
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < prepared.prompts.size(); ++i) {
    out.push_back(generate_request_json("cmpl-" + random_hex_id(), prepared.prompts[i], prepared.sampling,
                                        per_prompt[i], request.fields));
  }
  res.set_content(dump_json(out), "application/json");
}

}  // namespace striker::server
