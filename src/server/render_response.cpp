#include "server/render_response.h"

#include "server/json_fields.h"

namespace striker::server {

nlohmann::json sampling_params_json(const SamplingParams& p) {
  nlohmann::json logit_bias = nullptr;
  if (!p.logit_bias.empty()) {
    logit_bias = nlohmann::json::object();
    for (const auto& [id, bias] : p.logit_bias) logit_bias[std::to_string(id)] = bias;
  }
  auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"n", p.n},
          {"presence_penalty", p.presence_penalty},
          {"frequency_penalty", p.frequency_penalty},
          {"repetition_penalty", p.repetition_penalty},
          {"temperature", p.temperature},
          {"top_p", p.top_p},
          {"top_k", p.top_k},
          {"min_p", p.min_p},
          {"seed", opt(p.seed)},
          {"stop", p.stop},
          {"stop_token_ids", p.stop_token_ids},
          {"ignore_eos", p.ignore_eos},
          {"max_tokens", p.max_tokens},
          {"min_tokens", p.min_tokens},
          {"logprobs", opt(p.logprobs)},
          {"prompt_logprobs", opt(p.prompt_logprobs)},
          {"skip_special_tokens", p.skip_special_tokens},
          {"include_stop_str_in_output", p.include_stop_str_in_output},
          {"logit_bias", logit_bias},
          {"thinking_token_budget", opt(p.thinking_token_budget)}};
}

nlohmann::json generate_request_json(const std::string& request_id, const std::vector<int32_t>& token_ids,
                                     const SamplingRequest& sampling, const SamplingParams& params,
                                     const nlohmann::json& body) {
  JsonFields f(body);
  nlohmann::json stream_options = nullptr;
  if (sampling.stream) {
    stream_options = {{"include_usage", sampling.include_usage},
                      {"continuous_usage_stats", sampling.continuous_usage}};
  }
  const nlohmann::json* model = f.get("model");
  return {{"request_id", request_id},
          {"token_ids", token_ids},
          {"features", nullptr},  // multimodal placeholders: striker serves text only
          {"sampling_params", sampling_params_json(params)},
          {"model", model ? *model : nlohmann::json(nullptr)},
          {"stream", sampling.stream},
          {"stream_options", stream_options},
          {"cache_salt", sampling.cache_salt ? nlohmann::json(*sampling.cache_salt) : nlohmann::json(nullptr)},
          {"priority", sampling.priority},
          {"kv_transfer_params", nullptr}};
}

}  // namespace striker::server
