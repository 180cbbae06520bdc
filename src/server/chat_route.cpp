// POST /v1/chat/completions: non-streaming JSON and SSE streaming (chat-format.md §5.2–§5.3).
#include <httplib.h>

#include <ctime>

#include "server/api_error.h"
#include "server/chat_request.h"
#include "server/prompt_logprobs.h"
#include "server/request_preparation.h"
#include "server/serving_context.h"
#include "server/single_choice.h"

namespace striker::server {
namespace {

struct ChatChoice {
  std::unique_ptr<ChoiceParser> parser;
  std::string text;
  nlohmann::json logprobs = nlohmann::json::array();
  std::optional<FinishReason> finish;
  nlohmann::json stop_reason = nullptr;
  bool role_sent = false;
  bool tools_streamed = false;
  std::vector<int32_t> token_ids;  // return_token_ids, non-streaming (the stream sends each delta's)
};

struct ChatJob {
  explicit ChatJob(const ServingContext& c) : ctx(c) {}
  const ServingContext& ctx;
  ChatPrompt prompt;
  SamplingRequest sampling;
  std::unique_ptr<Generation> gen;
  std::vector<ChatChoice> choices;
  std::time_t created = std::time(nullptr);
  std::string id;
  std::optional<std::string> prompt_logprobs;  // JSON text (prompt_logprobs.h)

  TokenNames token_names() const { return TokenNames{ctx.tokenizer, sampling.return_tokens_as_token_ids}; }
};

// vLLM reports "tool_calls" only when calls were made, the engine stopped on its own, and the
// caller did not force one named tool (OpenAI reports "stop" then).
std::string chat_finish_reason(const ChatJob& job, const ChatChoice& c, bool has_tool_calls) {
  const std::string base = finish_reason_name(*c.finish);
  if (base == "stop" && has_tool_calls && job.prompt.parser.tool_choice != "named") return "tool_calls";
  return base;
}

void collect_choice_output(ChatJob& job, const ChoiceDelta& d) {
  auto& c = job.choices[size_t(d.index)];
  if (job.sampling.logprobs) {
    for (const auto& lp : d.logprobs) c.logprobs.push_back(chat_logprob_entry(job.token_names(), lp));
  }
  if (d.finish) {
    c.finish = d.finish;
    c.stop_reason = stop_reason_json(d.stop_reason, job.sampling.params);
  }
}

std::string final_reason_for_metrics(const ChatJob& job) {
  for (const auto& c : job.choices) {
    if (c.finish) return finish_reason_name(*c.finish);
  }
  return "abort";
}

void respond_non_streaming(ChatJob& job, const ConnectionWatch& watch, httplib::Response& res) {
  RequestAccounting acct(job.ctx, *job.gen);
  const bool complete = drive_generation(*job.gen, watch, job.ctx.stopping, [&](const RequestOutput& out) {
    acct.observe(out);
    if (!out.prompt_logprobs.empty() && !job.prompt_logprobs) {
      job.prompt_logprobs = prompt_logprobs_text(job.ctx.tokenizer, out.prompt_logprobs);
    }
    for (const auto& d : out.choices) {
      if (d.index < 0 || size_t(d.index) >= job.choices.size()) continue;
      auto& c = job.choices[size_t(d.index)];
      c.text += d.new_text;
      if (job.sampling.return_token_ids) c.token_ids.insert(c.token_ids.end(), d.new_tokens.begin(), d.new_tokens.end());
      collect_choice_output(job, d);
    }
    return true;
  });
  const int64_t max_tokens = job.sampling.params.max_tokens;
  if (!complete) {
    acct.finish("abort", job.gen->prompt_tokens(), job.sampling.params.n, max_tokens);
    res.status = 499;  // the client is gone; nothing will read this
    return;
  }
  nlohmann::json choices = nlohmann::json::array();
  for (size_t i = 0; i < job.choices.size(); ++i) {
    auto& c = job.choices[i];
    if (!c.finish) c.finish = FinishReason::Abort;
    ParsedMessage msg = parse_final_message(*c.parser, c.text, job.prompt.parallel_tool_calls);
    if (!job.prompt.include_reasoning) msg.reasoning.reset();
    const bool forced = job.prompt.parser.tool_choice == "required" || job.prompt.parser.tool_choice == "named";
    nlohmann::json message = {{"role", "assistant"}};
    message["content"] = msg.content ? nlohmann::json(*msg.content) : (forced ? nlohmann::json("") : nlohmann::json(nullptr));
    message["refusal"] = nullptr;
    message["annotations"] = nullptr;
    message["audio"] = nullptr;
    message["function_call"] = nullptr;
    if (!msg.tool_calls.empty()) message["tool_calls"] = msg.tool_calls;
    message["reasoning"] = msg.reasoning ? nlohmann::json(*msg.reasoning) : nlohmann::json(nullptr);
    nlohmann::json choice = {{"index", i}, {"message", message}};
    choice["logprobs"] = job.sampling.logprobs ? nlohmann::json{{"content", c.logprobs}} : nlohmann::json(nullptr);
    choice["finish_reason"] = chat_finish_reason(job, c, !msg.tool_calls.empty());
    choice["stop_reason"] = c.stop_reason;
    choice["token_ids"] = job.sampling.return_token_ids ? nlohmann::json(c.token_ids) : nlohmann::json(nullptr);
    choices.push_back(std::move(choice));
  }
  acct.finish(final_reason_for_metrics(job), job.gen->prompt_tokens(), job.sampling.params.n, max_tokens);
  nlohmann::json body = {{"id", job.id},
                         {"object", "chat.completion"},
                         {"created", job.created},
                         {"model", job.ctx.model_name()},
                         {"choices", choices},
                         {"service_tier", nullptr},
                         {"system_fingerprint", nullptr},
                         {"usage", usage_json(*job.gen, acct.completion_tokens())},
                         {"prompt_token_ids", job.sampling.return_token_ids ? nlohmann::json(job.prompt.tokens)
                                                                            : nlohmann::json(nullptr)},
                         {"kv_transfer_params", nullptr}};
  std::vector<std::string> raw;
  if (job.prompt_logprobs) raw.push_back(std::move(*job.prompt_logprobs));
  body["prompt_logprobs"] = raw.empty() ? nlohmann::json(nullptr) : raw_json_marker(0);
  res.status = 200;
  res.set_content(dump_with_raw_values(body, "prompt_logprobs", raw), "application/json");
}

nlohmann::json chunk_base(const ChatJob& job) {
  return {{"id", job.id}, {"object", "chat.completion.chunk"}, {"created", job.created}, {"model", job.ctx.model_name()}};
}

void stream_chat(ChatJob& job, const ConnectionWatch& watch, httplib::DataSink& sink) {
  RequestAccounting acct(job.ctx, *job.gen);
  // vLLM leaves token ids out of the stream when reasoning is hidden (they would leak it).
  const bool stream_ids = job.sampling.return_token_ids && job.prompt.include_reasoning;
  auto write_choice = [&](const nlohmann::json& choice, bool with_prompt_ids = false) {
    nlohmann::json chunk = chunk_base(job);
    chunk["choices"] = nlohmann::json::array({choice});
    if (with_prompt_ids) chunk["prompt_token_ids"] = job.prompt.tokens;
    if (job.sampling.continuous_usage) chunk["usage"] = usage_json(*job.gen, acct.completion_tokens());
    return send_event(sink, chunk);
  };
  const bool complete = drive_generation(*job.gen, watch, job.ctx.stopping, [&](const RequestOutput& out) {
    acct.observe(out);
    for (const auto& d : out.choices) {
      if (d.index < 0 || size_t(d.index) >= job.choices.size()) continue;
      auto& c = job.choices[size_t(d.index)];
      if (!c.role_sent) {
        c.role_sent = true;
        if (!write_choice({{"index", d.index}, {"delta", {{"role", "assistant"}, {"content", ""}}},
                           {"logprobs", nullptr}, {"finish_reason", nullptr}},
                          stream_ids)) {
          return false;
        }
      }
      collect_choice_output(job, d);
      ParsedDelta parsed = parse_choice_delta(*c.parser, d);
      nlohmann::json delta = nlohmann::json::object();
      if (!parsed.reasoning.empty() && job.prompt.include_reasoning) delta["reasoning"] = parsed.reasoning;
      if (!parsed.content.empty()) delta["content"] = parsed.content;
      nlohmann::json calls = nlohmann::json::array();
      for (auto& tc : parsed.tool_calls) {
        if (job.prompt.parallel_tool_calls || tc.value("index", 0) == 0) calls.push_back(tc);
      }
      if (!calls.empty()) {
        delta["tool_calls"] = calls;
        c.tools_streamed = true;
      }
      nlohmann::json logprobs = nullptr;
      if (job.sampling.logprobs && !d.logprobs.empty()) {
        logprobs = {{"content", nlohmann::json::array()}};
        for (const auto& lp : d.logprobs) logprobs["content"].push_back(chat_logprob_entry(job.token_names(), lp));
      }
      const bool ids = stream_ids && !d.new_tokens.empty();
      if (delta.empty() && logprobs.is_null() && !ids && !d.finish) continue;
      nlohmann::json choice = {{"index", d.index}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", nullptr}};
      if (stream_ids) choice["token_ids"] = d.new_tokens;
      if (d.finish) {
        choice["finish_reason"] = chat_finish_reason(job, c, c.tools_streamed);
        choice["stop_reason"] = c.stop_reason;
      }
      if (!write_choice(choice)) return false;
    }
    return true;
  });
  const int64_t max_tokens = job.sampling.params.max_tokens;
  if (!complete) {
    acct.finish("abort", job.gen->prompt_tokens(), job.sampling.params.n, max_tokens);
    sink.done();
    return;
  }
  acct.finish(final_reason_for_metrics(job), job.gen->prompt_tokens(), job.sampling.params.n, max_tokens);
  if (job.sampling.include_usage) {
    nlohmann::json chunk = chunk_base(job);
    chunk["choices"] = nlohmann::json::array();
    chunk["usage"] = usage_json(*job.gen, acct.completion_tokens());
    if (!send_event(sink, chunk)) return sink.done();
  }
  static const std::string kDone = "data: [DONE]\n\n";
  sink.write(kDone.data(), kDone.size());
  sink.done();
}

}  // namespace

void handle_chat_completions(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const RequestBody request = parse_request_body(req);
  auto job = std::make_shared<ChatJob>(ctx);
  PreparedChat prepared = prepare_chat_request(ctx, request);
  job->prompt = std::move(prepared.prompt);
  job->sampling = std::move(prepared.sampling);
  constrain_chat_generation(ctx, request.ordered, job->prompt, job->sampling);
  const int32_t n = job->sampling.params.n;
  job->choices.resize(size_t(n));
  for (auto& c : job->choices) c.parser = make_choice_parser(job->prompt.parser);
  job->id = "chatcmpl-" + random_hex_id();
  job->gen = std::make_unique<Generation>(ctx, job->id, n);
  job->gen->submit(job->prompt.tokens, job->sampling.params, job->sampling.cache_salt);

  respond_or_stream(
      job->sampling.stream, *job->gen, req, res,
      [&](const ConnectionWatch& watch, httplib::Response& r) { respond_non_streaming(*job, watch, r); },
      [job](const ConnectionWatch& watch, httplib::DataSink& sink) { stream_chat(*job, watch, sink); });
}

}  // namespace striker::server
