// POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API (messages_request.h) —
// content blocks (thinking, text, tool_use), stop_reason, and its streaming events
// (message_start, content_block_start/delta/stop, message_delta, message_stop); errors in its shape.
#include <httplib.h>

#include "server/api_error.h"
#include "server/messages_request.h"
#include "server/request_preparation.h"
#include "server/serving_context.h"
#include "server/single_choice.h"

namespace striker::server {
namespace {

using ojson = nlohmann::ordered_json;

void send_anthropic_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(dump_json(anthropic_error_body(status, message)), "application/json");
}

struct MessagesJob {
  explicit MessagesJob(const ServingContext& c) : ctx(c) {}
  const ServingContext& ctx;
  MessagesChatRequest request;
  std::string model;  // as the request named it (Anthropic echoes it)
  ChatPrompt prompt;
  SamplingRequest sampling;
  std::unique_ptr<ChoiceParser> parser;
  std::unique_ptr<Generation> gen;
  std::string id;
  SingleChoice choice;
  bool called_tools = false;

  // end_turn, max_tokens, stop_sequence (with the string), tool_use.
  std::pair<std::string, ojson> stop() const {
    if (choice.finish == FinishReason::Length) return {"max_tokens", nullptr};
    const nlohmann::json reason = stop_reason_json(choice.stop_reason, sampling.params);
    if (reason.is_string()) return {"stop_sequence", reason.get<std::string>()};
    if (called_tools) return {"tool_use", nullptr};
    return {"end_turn", nullptr};
  }
  ojson usage(int64_t output_tokens) const {
    return {{"input_tokens", gen->prompt_tokens() - gen->cached_tokens()},
            {"cache_creation_input_tokens", 0},
            {"cache_read_input_tokens", gen->cached_tokens()},
            {"output_tokens", output_tokens}};
  }
  ojson message(ojson content, const ojson& stop_reason_v, const ojson& stop_sequence, ojson usage_v) const {
    return {{"id", id},           {"type", "message"},          {"role", "assistant"},
            {"model", model},     {"content", std::move(content)}, {"stop_reason", stop_reason_v},
            {"stop_sequence", stop_sequence}, {"usage", std::move(usage_v)}};
  }
};

// Tool call arguments as the input object (the parser's arguments are a JSON object's text).
ojson input_of(const std::string& arguments) {
  auto v = ojson::parse(arguments, nullptr, false);
  return v.is_discarded() || !v.is_object() ? ojson::object() : v;
}

void respond_non_streaming(MessagesJob& job, const ConnectionWatch& watch, httplib::Response& res) {
  RequestAccounting acct(job.ctx, *job.gen);
  const int64_t max_tokens = job.sampling.params.max_tokens;
  if (!run_single_choice(*job.gen, job.ctx, acct, watch, max_tokens, job.choice, res)) return;
  const ParsedMessage msg = parse_final_message(*job.parser, job.choice.text, job.prompt.parallel_tool_calls);
  ojson content = ojson::array();
  if (msg.reasoning && !msg.reasoning->empty())
    content.push_back({{"type", "thinking"}, {"thinking", *msg.reasoning}, {"signature", ""}});
  if (msg.content && !msg.content->empty()) content.push_back({{"type", "text"}, {"text", *msg.content}});
  for (const auto& tc : msg.tool_calls) {
    const auto& fn = tc["function"];
    content.push_back({{"type", "tool_use"}, {"id", tc.value("id", "")}, {"name", fn.value("name", "")},
                       {"input", input_of(fn.value("arguments", "{}"))}});
  }
  job.called_tools = !msg.tool_calls.empty();
  const auto [reason, sequence] = job.stop();
  acct.finish(finish_reason_name(job.choice.finished()), job.gen->prompt_tokens(), 1, max_tokens);
  res.status = 200;
  res.set_content(dump_ordered_json(job.message(std::move(content), reason, sequence, job.usage(acct.completion_tokens()))),
                  "application/json");
}

// Anthropic SSE: `event: <type>` and `data: {"type": <type>, ...}`.
class BlockStream {
 public:
  explicit BlockStream(httplib::DataSink& sink) : sink_(sink) {}
  bool send(const char* type, const ojson& fields) { return send_typed_event(sink_, type, fields); }
  // The open block's kind ("thinking", "text", "tool_use") and, for tool_use, the call's index.
  bool delta(const std::string& kind, int call, ojson start_block, ojson delta) {
    if (kind != kind_ || call != call_) {
      if (!close()) return false;
      kind_ = kind;
      call_ = call;
      if (!send("content_block_start", {{"index", index_}, {"content_block", std::move(start_block)}})) return false;
    }
    if (delta.is_null()) return true;
    return send("content_block_delta", {{"index", index_}, {"delta", std::move(delta)}});
  }
  bool close() {
    if (kind_.empty()) return true;
    kind_.clear();
    call_ = -1;
    return send("content_block_stop", {{"index", index_++}});
  }

 private:
  httplib::DataSink& sink_;
  std::string kind_;
  int call_ = -1;
  int index_ = 0;
};

void stream_messages(MessagesJob& job, const ConnectionWatch& watch, httplib::DataSink& sink) {
  BlockStream ev(sink);
  RequestAccounting acct(job.ctx, *job.gen);
  const int64_t max_tokens = job.sampling.params.max_tokens;
  try {
    ojson start = job.message(ojson::array(), nullptr, nullptr, job.usage(0));
    if (!ev.send("message_start", {{"message", std::move(start)}})) {
      abandon_single_choice(*job.gen, acct, max_tokens);
      return sink.done();
    }
    const bool complete = drive_generation(*job.gen, watch, job.ctx.stopping, [&](const RequestOutput& out) {
      acct.observe(out);
      for (const auto& d : out.choices) {
        if (d.index != 0) continue;
        job.choice.add(d);
        const ParsedDelta p = parse_choice_delta(*job.parser, d);
        if (!p.reasoning.empty() &&
            !ev.delta("thinking", -1, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}},
                      {{"type", "thinking_delta"}, {"thinking", p.reasoning}}))
          return false;
        if (!p.content.empty() && !ev.delta("text", -1, {{"type", "text"}, {"text", ""}},
                                            {{"type", "text_delta"}, {"text", p.content}}))
          return false;
        for (const auto& tc : p.tool_calls) {
          const int index = tc.value("index", 0);
          if (!job.prompt.parallel_tool_calls && index > 0) continue;
          job.called_tools = true;
          const auto fn = tc.value("function", nlohmann::json::object());
          const std::string args = fn.contains("arguments") && fn["arguments"].is_string() ? fn["arguments"].get<std::string>() : "";
          if (!ev.delta("tool_use", index,
                        {{"type", "tool_use"}, {"id", tc.value("id", "")}, {"name", fn.value("name", "")},
                         {"input", ojson::object()}},
                        args.empty() ? ojson(nullptr) : ojson{{"type", "input_json_delta"}, {"partial_json", args}}))
            return false;
        }
      }
      return true;
    });
    if (!complete || !ev.close()) {
      abandon_single_choice(*job.gen, acct, max_tokens);
      return sink.done();
    }
    const auto [reason, sequence] = job.stop();
    acct.finish(finish_reason_name(job.choice.finished()), job.gen->prompt_tokens(), 1, max_tokens);
    if (ev.send("message_delta", {{"delta", {{"stop_reason", reason}, {"stop_sequence", sequence}}},
                                  {"usage", {{"output_tokens", acct.completion_tokens()}}}}))
      ev.send("message_stop", ojson::object());
  } catch (const ApiError& e) {
    abandon_single_choice(*job.gen, acct, max_tokens);
    const nlohmann::json body = anthropic_error_body(e.status(), e.what());
    ev.send("error", {{"error", body["error"]}});
  }
  sink.done();
}

// The request as a rendered chat prompt; count_tokens stops here.
void prepare(MessagesJob& job, const RequestBody& body, bool generating) {
  check_model_name(body.fields, job.ctx.options);
  if (const auto it = body.ordered.find("model"); it != body.ordered.end() && it->is_string()) job.model = *it;
  else job.model = job.ctx.model_name();
  job.request = messages_to_chat(body, generating);
  if (generating && job.request.thinking_budget && !job.ctx.options.limits.reasoning_known)
    throw bad_request("`thinking.budget_tokens` cannot be enforced: the server was started without "
                      "--reasoning-parser or --reasoning-config, so it does not know where thinking ends",
                      "thinking.budget_tokens");
  PreparedChat prepared = prepare_chat_request(job.ctx, job.request.chat);
  job.prompt = std::move(prepared.prompt);
  job.sampling = std::move(prepared.sampling);
}

}  // namespace

void handle_messages(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
  try {
    const RequestBody body = parse_request_body(req);
    auto job = std::make_shared<MessagesJob>(ctx);
    prepare(*job, body, true);
    constrain_chat_generation(ctx, job->request.chat.ordered, job->prompt, job->sampling);
    job->parser = make_choice_parser(job->prompt.parser);
    job->id = "msg_" + random_hex_id() + random_hex_id();
    job->gen = std::make_unique<Generation>(ctx, job->id, 1);
    job->gen->submit(job->prompt.tokens, job->sampling.params, job->sampling.cache_salt);
    respond_or_stream(
        job->request.stream, *job->gen, req, res,
        [&](const ConnectionWatch& watch, httplib::Response& r) { respond_non_streaming(*job, watch, r); },
        [job](const ConnectionWatch& watch, httplib::DataSink& sink) { stream_messages(*job, watch, sink); });
  } catch (const ApiError& e) {
    send_anthropic_error(res, e.status(), e.what());
  } catch (const Error& e) {
    send_anthropic_error(res, 400, e.what());
  }
}

void handle_count_tokens(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
  try {
    RequestBody body = parse_request_body(req);
    // count_tokens takes no max_tokens: give the conversion one so the prompt renders.
    if (!body.ordered.contains("max_tokens")) {
      body.ordered["max_tokens"] = 1;
      body.fields["max_tokens"] = 1;
    }
    MessagesJob job(ctx);
    prepare(job, body, false);
    res.status = 200;
    res.set_content(dump_json({{"input_tokens", job.prompt.tokens.size()}}), "application/json");
  } catch (const ApiError& e) {
    send_anthropic_error(res, e.status(), e.what());
  } catch (const Error& e) {
    send_anthropic_error(res, 400, e.what());
  }
}

}  // namespace striker::server
