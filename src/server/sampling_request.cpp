#include "server/sampling_request.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace striker::server {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kCompletionDefaultMaxTokens = 16;  // vLLM's CompletionRequest.max_tokens default

// Fields that change the output in ways this server does not implement: a request that sets
// them is rejected rather than silently served differently.
void reject_unsupported(const JsonFields& f) {
  auto unsupported = [](const std::string& name, const std::string& what) {
    return not_implemented("`" + name + "` " + what + " is not supported by this server", name);
  };
  if (auto v = f.integer("best_of", 0, kI32Max); v && *v > 1) {
    throw bad_request("`best_of` > 1 is not supported (vLLM removed it); use n", "best_of");
  }
  if (f.boolean("use_beam_search").value_or(false)) throw unsupported("use_beam_search", "= true");
  // structured_outputs, response_format and guided_* are read by server/structured_request.h.
  for (const char* name : {"allowed_token_ids", "bad_words", "suffix", "prompt_embeds"}) {
    if (f.has(name)) throw unsupported(name, "");
  }
}

std::vector<std::string> parse_stop(const nlohmann::json& v, const RequestLimits& limits) {
  std::vector<std::string> out;
  auto add = [&](const nlohmann::json& s) {
    if (!s.is_string()) throw bad_request("`stop` must be a string or an array of strings", "stop");
    auto str = s.get<std::string>();
    if (str.empty()) throw bad_request("`stop` strings must not be empty", "stop");
    if (str.size() > limits.max_stop_bytes) {
      throw bad_request("a `stop` string is longer than " + std::to_string(limits.max_stop_bytes) + " bytes", "stop");
    }
    out.push_back(std::move(str));
  };
  if (v.is_string()) {
    add(v);
  } else if (v.is_array()) {
    if (v.size() > limits.max_stop_strings) {
      throw bad_request("`stop` has " + std::to_string(v.size()) + " entries; at most " +
                            std::to_string(limits.max_stop_strings) + " are allowed",
                        "stop");
    }
    for (const auto& s : v) add(s);
  } else {
    throw bad_request("`stop` must be a string or an array of strings", "stop");
  }
  return out;
}

int32_t parse_token_id(const nlohmann::json& v, const RequestLimits& limits, const char* field) {
  if (!v.is_number_integer() && !v.is_number_unsigned()) {
    throw bad_request(std::string("`") + field + "` must contain integer token ids", field);
  }
  if (v.is_number_unsigned() ? v.get<uint64_t>() >= uint64_t(limits.vocab_size)
                             : (v.get<int64_t>() < 0 || v.get<int64_t>() >= limits.vocab_size)) {
    throw bad_request(std::string("`") + field + "` token id " + v.dump() + " is out of vocabulary (vocab size " +
                          std::to_string(limits.vocab_size) + ")",
                      field);
  }
  return int32_t(v.get<int64_t>());
}

std::map<int32_t, float> parse_logit_bias(const nlohmann::json& v, const RequestLimits& limits) {
  if (!v.is_object()) throw bad_request("`logit_bias` must be an object of token id -> bias", "logit_bias");
  if (v.size() > limits.max_logit_bias) {
    throw bad_request("`logit_bias` has " + std::to_string(v.size()) + " entries; at most " +
                          std::to_string(limits.max_logit_bias) + " are allowed",
                      "logit_bias");
  }
  std::map<int32_t, float> out;
  for (const auto& [key, bias] : v.items()) {
    int64_t id = -1;
    size_t used = 0;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != key.size() || key.empty()) {
      throw bad_request("`logit_bias` key '" + key + "' is not a token id", "logit_bias");
    }
    if (id < 0 || id >= limits.vocab_size) {
      throw bad_request("`logit_bias` token id " + key + " is out of vocabulary (vocab size " +
                            std::to_string(limits.vocab_size) + ")",
                        "logit_bias");
    }
    if (!bias.is_number() || !std::isfinite(bias.get<double>())) {
      throw bad_request("`logit_bias` value for token " + key + " must be a finite number", "logit_bias");
    }
    // OpenAI clamps the bias to [-100, 100].
    out[int32_t(id)] = float(std::clamp(bias.get<double>(), -100.0, 100.0));
  }
  return out;
}

}  // namespace

SamplingRequest parse_sampling_request(const nlohmann::json& body, ApiKind kind, const SamplingDefaults& defaults,
                                       const RequestLimits& limits) {
  JsonFields f(body);
  reject_unsupported(f);
  SamplingRequest out;
  SamplingParams& p = out.params;

  p.temperature = float(f.number("temperature", 0, kInf).value_or(defaults.temperature.value_or(1.0f)));
  p.top_p = float(f.number("top_p", 0, 1).value_or(defaults.top_p.value_or(1.0f)));
  if (p.top_p <= 0) throw bad_request("`top_p` must be in (0, 1], got 0", "top_p");
  p.top_k = int32_t(f.integer("top_k", -1, kI32Max).value_or(defaults.top_k.value_or(0)));
  p.min_p = float(f.number("min_p", 0, 1).value_or(defaults.min_p.value_or(0.0f)));
  p.presence_penalty = float(f.number("presence_penalty", -2, 2).value_or(0));
  p.frequency_penalty = float(f.number("frequency_penalty", -2, 2).value_or(0));
  p.repetition_penalty =
      float(f.number("repetition_penalty", 0, kInf).value_or(defaults.repetition_penalty.value_or(1.0f)));
  if (p.repetition_penalty <= 0) throw bad_request("`repetition_penalty` must be > 0", "repetition_penalty");

  if (const auto* seed = f.get("seed")) {
    if (seed->is_number_unsigned()) {
      p.seed = seed->get<uint64_t>();
    } else if (seed->is_number_integer()) {
      p.seed = uint64_t(seed->get<int64_t>());  // negative seeds are valid; only the bits matter
    } else {
      throw bad_request("`seed` must be an integer in the 64-bit range, got " + seed->dump(), "seed");
    }
  }
  if (const auto* stop = f.get("stop")) p.stop = parse_stop(*stop, limits);
  p.include_stop_str_in_output = f.boolean("include_stop_str_in_output").value_or(false);
  if (const auto* ids = f.array("stop_token_ids")) {
    if (ids->size() > limits.max_stop_strings) throw bad_request("`stop_token_ids` has too many entries", "stop_token_ids");
    for (const auto& id : *ids) p.stop_token_ids.push_back(parse_token_id(id, limits, "stop_token_ids"));
  }
  for (int32_t id : defaults.stop_token_ids) {
    if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), id) == p.stop_token_ids.end()) {
      p.stop_token_ids.push_back(id);
    }
  }
  if (const auto* bias = f.get("logit_bias")) p.logit_bias = parse_logit_bias(*bias, limits);
  p.ignore_eos = f.boolean("ignore_eos").value_or(false);
  p.skip_special_tokens = f.boolean("skip_special_tokens").value_or(true);
  p.n = int32_t(f.integer("n", 1, limits.max_n).value_or(1));

  // echo is a legacy-completions field; vLLM's chat request has its own `echo` (the last message), not served here.
  if (kind == ApiKind::Chat && f.boolean("echo").value_or(false)) {
    throw not_implemented("`echo` = true is not supported by this server for chat completions", "echo");
  }
  out.echo = kind == ApiKind::Completion && f.boolean("echo").value_or(false);

  // max_completion_tokens wins over the deprecated max_tokens (chat); completions only has max_tokens.
  std::optional<int64_t> mt;
  if (kind == ApiKind::Chat) mt = f.integer("max_completion_tokens", 1, std::numeric_limits<int64_t>::max());
  if (!mt) mt = f.integer("max_tokens", out.echo ? 0 : 1, std::numeric_limits<int64_t>::max());
  if (mt && *mt == 0) {
    // vLLM: echo with max_tokens 0 returns just the prompt; one token is still generated and dropped.
    out.echo_only = true;
    mt = 1;
  }
  out.max_tokens = mt;
  if (kind == ApiKind::Completion && !body.contains("max_tokens")) out.default_max_tokens = kCompletionDefaultMaxTokens;
  p.min_tokens = int32_t(f.integer("min_tokens", 0, kI32Max).value_or(0));
  if (const auto cap = mt ? mt : out.default_max_tokens; cap && p.min_tokens > *cap) {
    throw bad_request("`min_tokens` (" + std::to_string(p.min_tokens) + ") must be at most `max_tokens` (" +
                          std::to_string(*cap) + ")",
                      "min_tokens");
  }

  const int64_t max_lp = limits.max_logprobs;
  if (kind == ApiKind::Chat) {
    out.logprobs = f.boolean("logprobs").value_or(false);
    auto top = f.integer("top_logprobs", 0, max_lp);
    if (top && *top > 0 && !out.logprobs) {
      throw bad_request("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
    }
    if (out.logprobs) p.logprobs = int32_t(top.value_or(0));
  } else {
    auto lp = f.integer("logprobs", 0, max_lp);
    out.logprobs = lp.has_value();
    if (lp) p.logprobs = int32_t(*lp);
  }
  if (auto plp = f.integer("prompt_logprobs", 0, max_lp)) p.prompt_logprobs = int32_t(*plp);

  out.cache_salt = f.string("cache_salt");
  if (out.cache_salt && out.cache_salt->empty())
    throw bad_request("Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt");

  out.stream = f.boolean("stream").value_or(false);
  if (out.stream && p.prompt_logprobs) {
    throw bad_request("`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs");
  }
  // vLLM: echo with logprobs returns the prompt tokens' logprobs first, computed as prompt_logprobs
  // (the request's own prompt_logprobs, else logprobs); streaming included.
  if (out.echo && out.logprobs && !p.prompt_logprobs) p.prompt_logprobs = p.logprobs;
  if (const auto* so = f.object("stream_options")) {
    if (!out.stream) throw bad_request("Stream options can only be defined when `stream=True`.", "stream_options");
    JsonFields sof(*so);
    out.include_usage = sof.boolean("include_usage").value_or(false);
    out.continuous_usage = sof.boolean("continuous_usage_stats").value_or(false);
  }
  // vLLM's thinking_token_budget: a non-negative integer; -1 (vLLM: unlimited) or null sets none.
  if (auto budget = f.integer("thinking_token_budget", -1, kI32Max); budget && *budget >= 0) {
    if (!limits.reasoning_known) {
      throw bad_request("`thinking_token_budget` needs the server to know where reasoning starts and ends; it was "
                        "started without --reasoning-parser or --reasoning-config",
                        "thinking_token_budget");
    }
    p.thinking_token_budget = int32_t(*budget);
  }
  out.priority = int32_t(f.integer("priority", std::numeric_limits<int32_t>::min(), kI32Max).value_or(0));
  out.return_token_ids = f.boolean("return_token_ids").value_or(false);
  out.return_tokens_as_token_ids = f.boolean("return_tokens_as_token_ids").value_or(false);
  return out;
}

void resolve_max_tokens(SamplingRequest& req, int64_t prompt_tokens, int64_t max_model_len) {
  const int64_t room = max_model_len - prompt_tokens;
  const int64_t fill = std::max<int64_t>(room, 0);
  const int64_t requested = req.max_tokens.value_or(std::min(fill, req.default_max_tokens.value_or(fill)));
  if (room <= 0 || requested > room) {
    const int64_t shown = req.max_tokens.value_or(0);
    throw bad_request("This model's maximum context length is " + std::to_string(max_model_len) +
                          " tokens. However, you requested " + std::to_string(shown) +
                          " output tokens and your prompt contains " + std::to_string(prompt_tokens) +
                          " input tokens, for a total of " + std::to_string(prompt_tokens + shown) +
                          " tokens. Please reduce the length of the input prompt or the number of requested "
                          "output tokens. (parameter=input_tokens, value=" +
                          std::to_string(prompt_tokens) + ")",
                      "input_tokens");
  }
  req.params.max_tokens = int32_t(std::min<int64_t>(requested, std::numeric_limits<int32_t>::max()));
  req.params.min_tokens = std::min(req.params.min_tokens, req.params.max_tokens);
}

}  // namespace striker::server
