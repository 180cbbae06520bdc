// Generation (one HTTP request's engine work) and the helpers every route shares.
#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/ordered_json.h"
#include "server/api_error.h"
#include "server/serving_context.h"

namespace striker::server {

Generation::Generation(const ServingContext& ctx, std::string base_id, int32_t n)
    : engine_(ctx.engine),
      in_flight_(ctx.in_flight.enter()),
      base_id_(std::move(base_id)),
      n_(n),
      arrival_(Clock::now()),
      channel_(std::make_shared<OutputChannel>()) {}

Generation::~Generation() { abort_all(); }

void Generation::submit(std::vector<int32_t> prompt, const SamplingParams& params,
                        const std::optional<std::string>& cache_salt) {
  Sub sub;
  sub.id = prompts_.empty() ? base_id_ : base_id_ + "-" + std::to_string(prompts_.size());
  sub.prompt_tokens = int64_t(prompt.size());
  GenerationRequest request{sub.id, std::move(prompt), params, cache_salt};
  // The callback owns the channel, so an engine output arriving after this Generation is gone is harmless.
  auto channel = channel_;
  try {
    engine_.add_request(std::move(request), [channel](const RequestOutput& out) { channel->push(out); });
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw bad_request(e.what());
  }
  index_of_[sub.id] = prompts_.size();
  prompts_.push_back(std::move(sub));
}

std::optional<RequestOutput> Generation::next(std::chrono::milliseconds timeout) {
  auto out = channel_->pop(timeout);
  if (!out) return out;
  auto it = index_of_.find(out->request_id);
  if (it == index_of_.end()) return std::nullopt;  // not ours; cannot happen with unique ids
  Sub& sub = prompts_[it->second];
  if (out->finished) sub.finished = true;
  sub.cached_tokens = std::max(sub.cached_tokens, out->num_cached_tokens);
  if (!out->error.empty() && engine_error_.empty()) engine_error_ = out->error;
  const int32_t offset = int32_t(it->second) * n_;
  for (auto& c : out->choices) c.index += offset;
  return out;
}

void Generation::abort_all() {
  for (auto& sub : prompts_) {
    if (!sub.finished) {
      engine_.abort_request(sub.id);
      sub.finished = true;  // the engine's final Abort output is not waited for
    }
  }
}

bool Generation::all_finished() const {
  return std::all_of(prompts_.begin(), prompts_.end(), [](const Sub& s) { return s.finished; });
}

int64_t Generation::prompt_tokens() const {
  int64_t total = 0;
  for (const auto& s : prompts_) total += s.prompt_tokens;
  return total;
}

int64_t Generation::cached_tokens() const {
  int64_t total = 0;
  for (const auto& s : prompts_) total += s.cached_tokens;
  return total;
}

nlohmann::json usage_json(const Generation& gen, int64_t completion_tokens) {
  const int64_t prompt = gen.prompt_tokens();
  return {{"prompt_tokens", prompt},
          {"total_tokens", prompt + completion_tokens},
          {"completion_tokens", completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", gen.cached_tokens()}}}};
}

bool drive_generation(Generation& gen, const ConnectionWatch& watch, const std::atomic<bool>& stopping,
                      const std::function<bool(const RequestOutput&)>& on_output) {
  while (!gen.all_finished()) {
    if (watch.peer_closed()) {
      gen.abort_all();
      return false;
    }
    if (stopping.load()) {
      gen.abort_all();
      throw shutdown_abort_error();
    }
    auto out = gen.next(std::chrono::milliseconds(50));
    if (!out) continue;
    if (!gen.engine_error().empty()) {
      // Not the client's doing: 500 (in-band for a stream), as vLLM does for an engine failure.
      gen.abort_all();
      throw ApiError(500, "InternalServerError", gen.engine_error());
    }
    if (!on_output(*out)) {
      gen.abort_all();
      return false;
    }
  }
  return true;
}

std::string random_hex_id() {
  thread_local std::mt19937_64 rng(std::random_device{}());
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

nlohmann::json stop_reason_json(const std::optional<std::string>& reason, const SamplingParams& params) {
  if (!reason) return nullptr;
  const bool is_stop_string = std::find(params.stop.begin(), params.stop.end(), *reason) != params.stop.end();
  if (!is_stop_string && !reason->empty() && reason->size() < 11 &&
      std::all_of(reason->begin(), reason->end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::stoll(*reason);
  }
  return *reason;
}

std::string finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
  }
  return "stop";
}

namespace {

// Rejects nesting deeper than `limit` before the parser sees it (recursion in json handling).
void check_nesting(const std::string& body, int limit) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > limit) throw bad_request("request JSON is nested deeper than " + std::to_string(limit) + " levels");
    } else if (c == ']' || c == '}') --depth;
  }
}

}  // namespace

RequestBody parse_request_body(const httplib::Request& req) {
  const auto content_type = req.get_header_value("Content-Type");
  if (content_type.find("application/json") == std::string::npos) {
    throw bad_request("Content-Type must be application/json, got '" + content_type + "'");
  }
  check_nesting(req.body, 64);
  RequestBody body;
  try {
    body.ordered = parse_ordered_json(req.body);
  } catch (const nlohmann::json::exception& e) {
    throw bad_request(std::string("request body is not valid JSON: ") + e.what());
  }
  if (!body.ordered.is_object())
    throw bad_request(std::string("request body must be a JSON object, got ") + body.ordered.type_name());
  body.fields = body.ordered;
  return body;
}

std::string dump_json(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string dump_ordered_json(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void check_model_name(const nlohmann::json& body, const ServerOptions& options) {
  auto it = body.find("model");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_string()) throw bad_request("`model` must be a string", "model");
  const auto name = it->get<std::string>();
  const auto& names = options.served_model_names;
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    throw ApiError(404, "NotFoundError", "The model `" + name + "` does not exist.", "model");
  }
}

std::string token_text(const Tokenizer& tok, int32_t id) {
  const int32_t ids[1] = {id};
  return tok.decode(ids, false);
}

void respond_or_stream(bool stream, Generation& gen, const httplib::Request& req, httplib::Response& res,
                       const std::function<void(const ConnectionWatch&, httplib::Response&)>& respond,
                       std::function<void(const ConnectionWatch&, httplib::DataSink&)> stream_body) {
  auto watch = std::make_shared<ConnectionWatch>(req.remote_addr, req.remote_port, req.local_port);
  res.set_header(kRequestIdHeader, gen.id());
  if (!stream) {
    respond(*watch, res);
    return;
  }
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  // httplib 0.11 compresses text/* responses for clients that accept gzip or br (Python's requests
  // and httpx, so the openai SDK, always say so) and exempts only a bare "text/event-stream": with
  // our charset parameter the events would go through deflate, which holds them back until the
  // stream ends. Without the request's Accept-Encoding the stream goes out uncompressed, event by
  // event, as vLLM sends it. (httplib's Request object is not itself const.)
  const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
  Generation* g = &gen;
  res.set_chunked_content_provider(
      kSseContentType, [g, watch, body = std::move(stream_body)](size_t, httplib::DataSink& sink) {
        try {
          body(*watch, sink);
        } catch (const ApiError& e) {
          g->abort_all();
          send_stream_error(sink, e);
        } catch (const std::exception& e) {
          g->abort_all();
          send_stream_error(sink, ApiError(500, "InternalServerError", e.what()));
        }
        return true;
      });
}

void send_stream_error(httplib::DataSink& sink, const ApiError& error) {
  const std::string data = "data: " + dump_json(error_body(error)) + "\n\ndata: [DONE]\n\n";
  sink.write(data.data(), data.size());
  sink.done();
}

bool send_event(httplib::DataSink& sink, const nlohmann::json& chunk) {
  const std::string data = "data: " + dump_json(chunk) + "\n\n";
  return sink.write(data.data(), data.size());
}

bool send_typed_event(httplib::DataSink& sink, const char* type, const nlohmann::ordered_json& fields) {
  nlohmann::ordered_json e = {{"type", type}};
  for (auto it = fields.begin(); it != fields.end(); ++it) e[it.key()] = it.value();
  const std::string data = std::string("event: ") + type + "\ndata: " + dump_ordered_json(e) + "\n\n";
  return sink.write(data.data(), data.size());
}

ParsedDelta parse_choice_delta(ChoiceParser& parser, const ChoiceDelta& d) {
  ParsedDelta parsed = parser.feed(d.new_text, d.new_tokens);
  if (d.finish) {
    ParsedDelta tail = parser.finish();
    parsed.reasoning += tail.reasoning;
    parsed.content += tail.content;
    for (auto& tc : tail.tool_calls) parsed.tool_calls.push_back(std::move(tc));
  }
  return parsed;
}

std::string TokenNames::operator()(int32_t id) const {
  if (as_ids) return "token_id:" + std::to_string(id);
  const int32_t ids[1] = {id};
  return tok.decode(ids, false);
}

nlohmann::json chat_logprob_entry(const TokenNames& names, const TokenLogprob& lp) {
  auto piece = [&](int32_t id, float logprob) {
    std::string text = names(id);
    std::vector<int> bytes(text.begin(), text.end());
    for (auto& b : bytes) b &= 0xff;
    return nlohmann::json{{"token", text}, {"logprob", std::max(logprob, -9999.0f)}, {"bytes", bytes}};
  };
  nlohmann::json entry = piece(lp.token, lp.logprob);
  nlohmann::json top = nlohmann::json::array();
  for (const auto& [id, logprob] : lp.top) top.push_back(piece(id, logprob));
  entry["top_logprobs"] = top;
  return entry;
}

}  // namespace striker::server

namespace striker::server {

void RequestAccounting::observe(const RequestOutput& out) {
  const auto now = Clock::now();
  if (out.times.was_scheduled()) times_ = out.times;
  for (const auto& c : out.choices) {
    if (c.new_tokens.empty() || c.index < 0 || size_t(c.index) >= last_token_.size()) continue;
    completion_tokens_ += int64_t(c.new_tokens.size());
    if (!first_token_at_) first_token_at_ = now;
    last_token_at_ = now;
    auto& last = last_token_[size_t(c.index)];
    if (!first_token_seen_) {
      metrics_.record_first_token(std::chrono::duration<double>(now - arrival_).count());
      first_token_seen_ = true;
    } else if (last) {
      metrics_.record_inter_token(std::chrono::duration<double>(now - *last).count());
    }
    last = now;
  }
}

void RequestAccounting::finish(const std::string& finished_reason, int64_t prompt_tokens, int32_t n,
                               int64_t max_tokens) {
  if (recorded_) return;
  recorded_ = true;
  metrics_.record_request(finished_reason, prompt_tokens, completion_tokens_, n, max_tokens,
                          std::chrono::duration<double>(Clock::now() - arrival_).count());
  // vLLM's phase times (its RequestStateStats): queued -> first scheduled -> first token -> last token.
  if (times_.was_scheduled() && first_token_at_) {
    auto secs = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
    metrics_.record_phases(RequestPhases{secs(times_.queued, times_.scheduled), secs(times_.scheduled, *first_token_at_),
                                         secs(*first_token_at_, *last_token_at_),
                                         secs(times_.scheduled, *last_token_at_)});
  }
  request_log_.note_usage(request_id_, prompt_tokens, completion_tokens_);
}

}  // namespace striker::server
