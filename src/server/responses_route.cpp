// POST /v1/responses (OpenAI's Responses API: output items and, streaming, its typed SSE events),
// GET and DELETE /v1/responses/{id} (responses kept by `store`). The request runs through the chat
// pipeline (responses_request.h); this file builds the Responses objects around it.
#include <httplib.h>

#include <chrono>

#include "server/api_error.h"
#include "server/request_preparation.h"
#include "server/response_store.h"
#include "server/responses_request.h"
#include "server/serving_context.h"
#include "server/single_choice.h"

namespace striker::server {
namespace {

using ojson = nlohmann::ordered_json;

ojson echo(const ojson& body, const char* name, ojson fallback = nullptr) {
  const ojson* v = item_field(body, name);
  return v ? *v : fallback;
}

struct ResponsesJob {
  explicit ResponsesJob(const ServingContext& c) : ctx(c) {}
  const ServingContext& ctx;
  ojson body;  // the request as sent (echoed fields)
  ResponsesChatRequest request;
  ChatPrompt prompt;
  SamplingRequest sampling;
  std::unique_ptr<ChoiceParser> parser;
  std::unique_ptr<Generation> gen;
  std::string id;
  double created_at = 0;
  SingleChoice choice;
  int32_t think_end = -1;  // `</think>`: the generated tokens before it are reasoning tokens
  // Non-streaming with output logprobs: a second parser sees the deltas as they come, so the logprobs of
  // the tokens whose deltas wrote message text can be told from the reasoning's and the tool calls'.
  std::unique_ptr<ChoiceParser> classifier;
  std::vector<TokenLogprob> text_logprobs;

  // The Responses logprob entries of `lps` (the chat completions' shape: token, logprob, bytes, top_logprobs).
  ojson logprob_entries(const std::vector<TokenLogprob>& lps) const {
    ojson out = ojson::array();
    const TokenNames names{ctx.tokenizer, sampling.return_tokens_as_token_ids};
    for (const auto& lp : lps) out.push_back(ojson(chat_logprob_entry(names, lp)));
    return out;
  }

  // The Response object at `status` with these output items (usage null while in progress).
  ojson response(const std::string& status, ojson output, ojson usage) const {
    ojson reasoning = {{"effort", nullptr}, {"summary", nullptr}};
    if (const ojson* r = item_field(body, "reasoning"); r && r->is_object()) reasoning["effort"] = echo(*r, "effort");
    ojson text_format = {{"format", {{"type", "text"}}}};
    if (const ojson* t = item_field(body, "text"); t && item_field(*t, "format")) text_format["format"] = (*t)["format"];
    ojson r = {{"id", id},
               {"object", "response"},
               {"created_at", created_at},
               {"status", status},
               {"background", false},
               {"error", nullptr},
               {"incomplete_details", nullptr},
               {"instructions", echo(body, "instructions")},
               {"max_output_tokens", echo(body, "max_output_tokens")},
               {"metadata", echo(body, "metadata", ojson::object())},
               {"model", ctx.model_name()},
               {"output", std::move(output)},
               {"parallel_tool_calls", prompt.parallel_tool_calls},
               {"previous_response_id", echo(body, "previous_response_id")},
               {"reasoning", std::move(reasoning)},
               {"store", request.store},
               {"temperature", sampling.params.temperature},
               {"text", std::move(text_format)},
               {"tool_choice", echo(body, "tool_choice", "auto")},
               {"tools", echo(body, "tools", ojson::array())},
               {"top_logprobs", echo(body, "top_logprobs")},
               {"top_p", sampling.params.top_p},
               {"truncation", "disabled"},
               {"usage", std::move(usage)},
               {"user", echo(body, "user")}};
    if (status == "incomplete") r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    if (status == "completed") {
      r["completed_at"] = double(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count()) /
                          1000.0;
    }
    return r;
  }

  std::string final_status() const { return choice.finish == FinishReason::Length ? "incomplete" : "completed"; }

  ojson usage(int64_t output_tokens) const {
    int64_t reasoning_tokens = 0;
    const ParserSettings& ps = prompt.parser;
    if (!ps.reasoning_parser.empty() && ps.thinking_enabled && !ps.reasoning_ended_in_prompt) {
      for (int32_t t : choice.tokens) {
        if (t == think_end) break;
        ++reasoning_tokens;
      }
    }
    const int64_t input = gen->prompt_tokens();
    return {{"input_tokens", input},
            {"input_tokens_details", {{"cached_tokens", gen->cached_tokens()}}},
            {"output_tokens", output_tokens},
            {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
            {"total_tokens", input + output_tokens}};
  }

  // Keeps the finished response and the conversation it continues (previous_response_id).
  void store(const ojson& response_obj) const {
    if (!request.store || !ctx.responses) return;
    StoredResponse s{response_obj, request.conversation};
    append_output_as_messages(response_obj["output"], s.conversation);
    ctx.responses->put(id, std::move(s));
  }
};

std::string new_id(const char* prefix) { return prefix + random_hex_id() + random_hex_id(); }

ojson reasoning_item(const std::string& id, const std::string& text, const char* status) {
  ojson content = ojson::array();
  if (!text.empty() || std::string(status) == "completed") content.push_back({{"type", "reasoning_text"}, {"text", text}});
  return {{"id", id}, {"type", "reasoning"}, {"summary", ojson::array()}, {"content", std::move(content)},
          {"encrypted_content", nullptr}, {"status", status}};
}
ojson output_text_part(const std::string& text, ojson logprobs = ojson::array()) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", ojson::array()}, {"logprobs", std::move(logprobs)}};
}
ojson message_item(const std::string& id, const std::string& text, const char* status,
                   ojson logprobs = ojson::array()) {
  ojson content = ojson::array();
  if (std::string(status) == "completed") content.push_back(output_text_part(text, std::move(logprobs)));
  return {{"id", id}, {"type", "message"}, {"status", status}, {"role", "assistant"}, {"content", std::move(content)}};
}
ojson call_item(const std::string& id, const std::string& call_id, const std::string& name, const std::string& args,
                const char* status) {
  return {{"id", id}, {"type", "function_call"}, {"status", status}, {"call_id", call_id}, {"name", name},
          {"arguments", args}};
}

// The output items of a finished text: reasoning, then the message, then the function calls.
ojson output_items(ResponsesJob& job) {
  const ParsedMessage msg = parse_final_message(*job.parser, job.choice.text, job.prompt.parallel_tool_calls);
  ojson out = ojson::array();
  if (msg.reasoning && !msg.reasoning->empty()) out.push_back(reasoning_item(new_id("rs_"), *msg.reasoning, "completed"));
  const std::string content = msg.content.value_or("");
  if (!content.empty() || msg.tool_calls.empty())
    out.push_back(message_item(new_id("msg_"), content, "completed", job.logprob_entries(job.text_logprobs)));
  for (const auto& tc : msg.tool_calls) {
    const auto& fn = tc["function"];
    out.push_back(call_item(new_id("fc_"), tc.value("id", ""), fn.value("name", ""), fn.value("arguments", ""),
                            "completed"));
  }
  return out;
}

void respond_non_streaming(ResponsesJob& job, const ConnectionWatch& watch, httplib::Response& res) {
  RequestAccounting acct(job.ctx, *job.gen);
  const int64_t max_tokens = job.sampling.params.max_tokens;
  std::function<void(const ChoiceDelta&)> on_delta;
  if (job.request.output_logprobs) {
    job.classifier = make_choice_parser(job.prompt.parser);
    on_delta = [&job](const ChoiceDelta& d) {
      if (!parse_choice_delta(*job.classifier, d).content.empty())
        job.text_logprobs.insert(job.text_logprobs.end(), d.logprobs.begin(), d.logprobs.end());
    };
  }
  if (!run_single_choice(*job.gen, job.ctx, acct, watch, max_tokens, job.choice, res, on_delta)) return;
  ojson r = job.response(job.final_status(), output_items(job), job.usage(acct.completion_tokens()));
  acct.finish(finish_reason_name(job.choice.finished()), job.gen->prompt_tokens(), 1, max_tokens);
  job.store(r);
  res.status = 200;
  res.set_content(dump_ordered_json(r), "application/json");
}

// Responses SSE: `event: <type>` and `data: {"type": ..., ..., "sequence_number": n}` per event.
class EventStream {
 public:
  explicit EventStream(httplib::DataSink& sink) : sink_(sink) {}
  bool send(const char* type, ojson fields) {
    fields["sequence_number"] = seq_++;
    return send_typed_event(sink_, type, fields);
  }

 private:
  httplib::DataSink& sink_;
  int64_t seq_ = 0;
};

// The open output item of a stream and the finished ones before it.
class StreamedItems {
 public:
  explicit StreamedItems(EventStream& events) : ev_(events) {}

  bool reasoning(const std::string& delta) {
    if (kind_ != Kind::Reasoning && !open(Kind::Reasoning, reasoning_item(new_id("rs_"), "", "in_progress"))) return false;
    text_ += delta;
    return ev_.send("response.reasoning_text.delta", {{"item_id", id()}, {"output_index", index()},
                                                      {"content_index", 0}, {"delta", delta}});
  }
  // `logprobs`: the entries of the tokens that wrote `delta` (empty unless the request included them).
  bool content(const std::string& delta, const ojson& logprobs) {
    if (kind_ != Kind::Message && !open(Kind::Message, message_item(new_id("msg_"), "", "in_progress"))) return false;
    text_ += delta;
    for (const auto& e : logprobs) logprobs_.push_back(e);
    return ev_.send("response.output_text.delta", {{"item_id", id()}, {"output_index", index()}, {"content_index", 0},
                                                   {"delta", delta}, {"logprobs", logprobs}});
  }
  // An OpenAI chat delta tool call: a new index opens a function_call item, arguments append.
  bool tool_call(const nlohmann::json& tc) {
    const int index_in_message = tc.value("index", 0);
    if (kind_ != Kind::Call || call_index_ != index_in_message) {
      const auto fn = tc.value("function", nlohmann::json::object());
      if (!open(Kind::Call, call_item(new_id("fc_"), tc.value("id", ""), fn.value("name", ""), "", "in_progress")))
        return false;
      call_index_ = index_in_message;
    }
    const auto fn = tc.value("function", nlohmann::json::object());
    const std::string delta = fn.is_object() && fn.contains("arguments") && fn["arguments"].is_string()
                                  ? fn["arguments"].get<std::string>()
                                  : "";
    if (delta.empty()) return true;
    text_ += delta;
    return ev_.send("response.function_call_arguments.delta",
                    {{"item_id", id()}, {"output_index", index()}, {"delta", delta}});
  }
  bool close() {
    if (kind_ == Kind::None) return true;
    ojson done = item_;
    bool ok = true;
    if (kind_ == Kind::Reasoning) {
      ok = ev_.send("response.reasoning_text.done",
                    {{"item_id", id()}, {"output_index", index()}, {"content_index", 0}, {"text", text_}}) &&
           ev_.send("response.content_part.done", {{"item_id", id()}, {"output_index", index()}, {"content_index", 0},
                                                   {"part", {{"type", "reasoning_text"}, {"text", text_}}}});
      done = reasoning_item(id(), text_, "completed");
    } else if (kind_ == Kind::Message) {
      ok = ev_.send("response.output_text.done", {{"item_id", id()}, {"output_index", index()}, {"content_index", 0},
                                                  {"text", text_}, {"logprobs", logprobs_}}) &&
           ev_.send("response.content_part.done", {{"item_id", id()}, {"output_index", index()}, {"content_index", 0},
                                                   {"part", output_text_part(text_, logprobs_)}});
      done = message_item(id(), text_, "completed", logprobs_);
    } else {
      ok = ev_.send("response.function_call_arguments.done",
                    {{"item_id", id()}, {"output_index", index()}, {"name", item_["name"]}, {"arguments", text_}});
      done = call_item(id(), item_["call_id"], item_["name"], text_, "completed");
    }
    ok = ok && ev_.send("response.output_item.done", {{"output_index", index()}, {"item", done}});
    output_.push_back(std::move(done));
    kind_ = Kind::None;
    return ok;
  }
  // A response that produced nothing still has its (empty) message.
  bool finish() {
    if (!close()) return false;
    if (output_.empty()) return open(Kind::Message, message_item(new_id("msg_"), "", "in_progress")) && close();
    return true;
  }
  const ojson& output() const { return output_; }

 private:
  enum class Kind { None, Reasoning, Message, Call };
  bool open(Kind kind, ojson item) {
    if (!close()) return false;
    kind_ = kind;
    item_ = std::move(item);
    text_.clear();
    logprobs_ = ojson::array();
    if (!ev_.send("response.output_item.added", {{"output_index", index()}, {"item", item_}})) return false;
    if (kind == Kind::Reasoning)
      return ev_.send("response.content_part.added", {{"item_id", id()}, {"output_index", index()}, {"content_index", 0},
                                                      {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
    if (kind == Kind::Message)
      return ev_.send("response.content_part.added",
                      {{"item_id", id()}, {"output_index", index()}, {"content_index", 0}, {"part", output_text_part("")}});
    return true;
  }
  std::string id() const { return item_["id"].get<std::string>(); }
  int64_t index() const { return int64_t(output_.size()); }

  EventStream& ev_;
  Kind kind_ = Kind::None;
  ojson item_;
  std::string text_;
  ojson logprobs_ = ojson::array();  // the open message's, as its deltas carried them
  int call_index_ = -1;
  ojson output_ = ojson::array();
};

void stream_response(ResponsesJob& job, const ConnectionWatch& watch, httplib::DataSink& sink) {
  EventStream ev(sink);
  RequestAccounting acct(job.ctx, *job.gen);
  const int64_t max_tokens = job.sampling.params.max_tokens;
  try {
    const ojson started = job.response("in_progress", ojson::array(), nullptr);
    if (!ev.send("response.created", {{"response", started}}) || !ev.send("response.in_progress", {{"response", started}})) {
      abandon_single_choice(*job.gen, acct, max_tokens);
      return sink.done();
    }
    StreamedItems items(ev);
    const bool complete = drive_generation(*job.gen, watch, job.ctx.stopping, [&](const RequestOutput& out) {
      acct.observe(out);
      for (const auto& d : out.choices) {
        if (d.index != 0) continue;
        job.choice.add(d);
        const ParsedDelta p = parse_choice_delta(*job.parser, d);
        if (!p.reasoning.empty() && !items.reasoning(p.reasoning)) return false;
        if (!p.content.empty() &&
            !items.content(p.content, job.request.output_logprobs ? job.logprob_entries(d.logprobs) : ojson::array()))
          return false;
        for (const auto& tc : p.tool_calls) {
          if (!job.prompt.parallel_tool_calls && tc.value("index", 0) > 0) continue;
          if (!items.tool_call(tc)) return false;
        }
      }
      return true;
    });
    if (!complete || !items.finish()) {
      abandon_single_choice(*job.gen, acct, max_tokens);
      return sink.done();
    }
    ojson r = job.response(job.final_status(), items.output(), job.usage(acct.completion_tokens()));
    acct.finish(finish_reason_name(job.choice.finished()), job.gen->prompt_tokens(), 1, max_tokens);
    job.store(r);
    const char* type = r["status"] == "completed" ? "response.completed" : "response.incomplete";
    ev.send(type, {{"response", std::move(r)}});
  } catch (const ApiError& e) {
    abandon_single_choice(*job.gen, acct, max_tokens);
    ev.send("error", {{"code", e.type()}, {"message", e.what()}, {"param", e.param().empty() ? ojson(nullptr) : ojson(e.param())}});
  }
  sink.done();
}

ApiError response_not_found(const std::string& id) {
  return ApiError(404, "NotFoundError", "Response with id '" + id + "' not found.", "response_id");
}

}  // namespace

void handle_responses(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const RequestBody body = parse_request_body(req);
  check_model_name(body.fields, ctx.options);
  auto job = std::make_shared<ResponsesJob>(ctx);
  job->body = body.ordered;
  std::optional<StoredResponse> previous;
  if (const ojson* prev = item_field(body.ordered, "previous_response_id")) {
    if (!prev->is_string()) throw bad_request("`previous_response_id` must be a string", "previous_response_id");
    if (ctx.responses) previous = ctx.responses->get(prev->get<std::string>());
    if (!previous) {
      throw ApiError(404, "NotFoundError", "Previous response with id '" + prev->get<std::string>() + "' not found.",
                     "previous_response_id");
    }
  }
  job->request = responses_to_chat(body, previous ? &previous->conversation : nullptr);
  PreparedChat prepared = prepare_chat_request(ctx, job->request.chat);
  job->prompt = std::move(prepared.prompt);
  job->sampling = std::move(prepared.sampling);
  constrain_chat_generation(ctx, job->request.chat.ordered, job->prompt, job->sampling);
  job->think_end = ctx.tokenizer.token_to_id("</think>").value_or(-1);
  job->parser = make_choice_parser(job->prompt.parser);
  job->id = new_id("resp_");
  job->created_at = double(std::time(nullptr));
  job->gen = std::make_unique<Generation>(ctx, job->id, 1);
  job->gen->submit(job->prompt.tokens, job->sampling.params, job->sampling.cache_salt);
  respond_or_stream(
      job->request.stream, *job->gen, req, res,
      [&](const ConnectionWatch& watch, httplib::Response& r) { respond_non_streaming(*job, watch, r); },
      [job](const ConnectionWatch& watch, httplib::DataSink& sink) { stream_response(*job, watch, sink); });
}

void handle_get_response(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  if (req.has_param("stream") && req.get_param_value("stream") != "false") {
    throw bad_request("streaming a stored response again is not supported (responses run in the request)", "stream");
  }
  auto stored = ctx.responses ? ctx.responses->get(id) : std::nullopt;
  if (!stored) throw response_not_found(id);
  res.status = 200;
  res.set_content(dump_ordered_json(stored->response), "application/json");
}

void handle_delete_response(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  if (!ctx.responses || !ctx.responses->erase(id)) throw response_not_found(id);
  res.status = 200;
  res.set_content(dump_ordered_json({{"id", id}, {"object", "response"}, {"deleted", true}}), "application/json");
}

}  // namespace striker::server
