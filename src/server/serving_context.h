// Internal to src/server: what a route handler needs once the model is loaded, and the
// per-request bridge from engine outputs to the HTTP thread.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "engine/engine.h"
#include "server/api_error.h"
#include "server/choice_parser.h"
#include "server/connection_watch.h"
#include "server/in_flight.h"
#include "server/json_fields.h"
#include "server/metrics.h"
#include "server/output_channel.h"
#include "server/request_log.h"
#include "server/response_store.h"
#include "server/server_options.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
struct Request;
struct Response;
class DataSink;
}  // namespace httplib

namespace striker::grammar {
class GrammarCache;
}

namespace striker::server {

using Clock = std::chrono::steady_clock;

struct ServingContext {
  Engine& engine;
  const Tokenizer& tokenizer;
  const ChatTemplate* chat_template;
  ServerOptions options;
  std::shared_ptr<ServerMetrics> metrics_owner;
  ServerMetrics& metrics;  // *metrics_owner
  RequestLog& request_log;
  // Set when a drain gave up (--shutdown-timeout passed, or a second signal): running generations
  // end with a 503 the client sees (in-band for a stream).
  std::atomic<bool> stopping{false};
  // What a graceful drain waits for: requests with engine work (a Generation, alive until the
  // response is written), and route handlers still deciding whether to take a request.
  mutable InFlight in_flight;
  mutable InFlight admitting;
  std::shared_ptr<grammar::GrammarCache> grammars;  // structured outputs, shared across requests
  std::shared_ptr<ResponseStore> responses;  // /v1/responses kept by `store` (null: none kept)
  const std::string& model_name() const { return options.served_model_names.front(); }
};

// One HTTP request's engine work: one engine request per prompt (completions may batch
// prompts), all feeding one channel. Destroying it aborts whatever has not finished, so a client
// that vanishes at any point (even before the first byte is written) frees its KV blocks.
class Generation {
 public:
  Generation(const ServingContext& ctx, std::string base_id, int32_t n);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Throws ApiError(400) when the engine rejects the request.
  void submit(std::vector<int32_t> prompt, const SamplingParams& params,
              const std::optional<std::string>& cache_salt = std::nullopt);
  // Next output with choice indexes made global (prompt i, choice c -> i*n + c).
  std::optional<RequestOutput> next(std::chrono::milliseconds timeout);
  void abort_all();
  bool all_finished() const;

  const std::string& id() const { return base_id_; }
  // Why the engine ended one of the prompts (RequestOutput::error); empty when none failed.
  const std::string& engine_error() const { return engine_error_; }
  int32_t num_choices() const { return int32_t(prompts_.size()) * n_; }
  int64_t prompt_tokens() const;
  // Prompt tokens served from the prefix cache, over every prompt (usage.prompt_tokens_details).
  int64_t cached_tokens() const;
  Clock::time_point arrival() const { return arrival_; }

 private:
  struct Sub {
    std::string id;
    int64_t prompt_tokens = 0;
    int64_t cached_tokens = 0;
    bool finished = false;
  };
  Engine& engine_;
  InFlight::Ticket in_flight_;  // keeps a drain waiting until the response is written
  std::string base_id_;
  int32_t n_;
  Clock::time_point arrival_;
  std::shared_ptr<OutputChannel> channel_;
  std::vector<Sub> prompts_;
  std::map<std::string, size_t> index_of_;
  std::string engine_error_;
};

// Random lowercase hex, as vLLM's random_uuid() (16 hex digits).
std::string random_hex_id();

// OpenAI `usage`, with the prompt tokens served from the prefix cache in prompt_tokens_details.
nlohmann::json usage_json(const Generation& gen, int64_t completion_tokens);

// A stop_reason as vLLM reports it: the token id as an integer, a stop string as a string.
nlohmann::json stop_reason_json(const std::optional<std::string>& reason, const SamplingParams& params);

std::string finish_reason_name(FinishReason reason);

// The JSON body of a request: parse errors, non-objects and absurd nesting become ApiError(400).
RequestBody parse_request_body(const httplib::Request& req);

// Serializes without throwing on invalid UTF-8 (token pieces can be partial characters).
std::string dump_json(const nlohmann::json& j);
std::string dump_ordered_json(const nlohmann::ordered_json& j);  // key order kept (the Responses / Messages bodies)

// Checks `model` against the served names (404 NotFoundError as vLLM).
void check_model_name(const nlohmann::json& body, const ServerOptions& options);

// Route handlers (chat_route.cpp, completion_route.cpp, tokenize_route.cpp, render_route.cpp).
void handle_chat_completions(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_completions(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_tokenize(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_detokenize(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res);
// render_route.cpp: vLLM's /v1/chat/completions/render and /v1/completions/render.
void handle_chat_completions_render(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_completions_render(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res);
// responses_route.cpp: OpenAI's Responses API (POST /v1/responses, GET and DELETE /v1/responses/{id}).
void handle_responses(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_get_response(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_delete_response(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res);
// messages_route.cpp: Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens).
void handle_messages(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res);
void handle_count_tokens(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res);

// Shared by both generation routes: runs until every choice finished or the client left.
// `on_output` returns false when writing to the client failed. Returns false if the client left
// (everything was aborted); throws ApiError(500) when the engine ended a prompt by a failure and
// ApiError(503) when the server aborts it on shutdown (`stopping`), so a connected client always
// gets an answer it can retry.
bool drive_generation(Generation& gen, const ConnectionWatch& watch, const std::atomic<bool>& stopping,
                      const std::function<bool(const RequestOutput&)>& on_output);

std::string token_text(const Tokenizer& tok, int32_t id);

// An error after an SSE stream has started: `data: {"error": ...}` then `data: [DONE]`.
void send_stream_error(httplib::DataSink& sink, const ApiError& error);

// The end of both generation routes: a non-streaming request is answered now by `respond`; a
// streaming one gets SSE headers and `stream_body` runs in httplib's content provider, where a
// failure aborts `gen` and is reported in-band (the headers are gone), as vLLM does.
// `stream_body` must keep the job that owns `gen` alive.
void respond_or_stream(bool stream, Generation& gen, const httplib::Request& req, httplib::Response& res,
                       const std::function<void(const ConnectionWatch&, httplib::Response&)>& respond,
                       std::function<void(const ConnectionWatch&, httplib::DataSink&)> stream_body);

// SSE responses name their charset (as vLLM does): without it, HTTP clients such as
// Python requests decode the UTF-8 stream as ISO-8859-1.
inline constexpr const char* kSseContentType = "text/event-stream; charset=utf-8";

// How logprobs name a token: its text, or "token_id:<id>" (vLLM's return_tokens_as_token_ids,
// for clients that need the exact ids, which text pieces of partial UTF-8 lose).
struct TokenNames {
  const Tokenizer& tok;
  bool as_ids = false;
  std::string operator()(int32_t id) const;
};

// One `data: <chunk>` event of the chat / completions streams; false when the client is gone.
bool send_event(httplib::DataSink& sink, const nlohmann::json& chunk);

// One event of the typed SSE streams (Responses, Anthropic Messages): `event: <type>` and
// `data: {"type": <type>, ...fields}`; false when the client is gone.
bool send_typed_event(httplib::DataSink& sink, const char* type, const nlohmann::ordered_json& fields);

// A choice's delta through its parser: the parsed pieces of the new text and, when the choice
// finished, whatever the parser still held back.
ParsedDelta parse_choice_delta(ChoiceParser& parser, const ChoiceDelta& d);
// Logprob entries for one token, as chat (`content[]` item) and as completions pieces.
nlohmann::json chat_logprob_entry(const TokenNames& names, const TokenLogprob& lp);

}  // namespace striker::server

namespace striker::server {

// Per-request accounting shared by the generation routes: token counts for `usage`, TTFT and
// inter-token latency into the metrics, and the request's outcome at the end.
class RequestAccounting {
 public:
  RequestAccounting(const ServingContext& ctx, const Generation& gen)
      : metrics_(ctx.metrics),
        request_log_(ctx.request_log),
        request_id_(gen.id()),
        arrival_(gen.arrival()),
        last_token_(size_t(gen.num_choices())) {}
  void observe(const RequestOutput& out);
  int64_t completion_tokens() const { return completion_tokens_; }
  // Records the request once (e2e latency, success counter by finished_reason, the request log's counts,
  // and vLLM's phase times when the engine scheduled it: queue, prefill, decode, inference).
  void finish(const std::string& finished_reason, int64_t prompt_tokens, int32_t n, int64_t max_tokens);

 private:
  ServerMetrics& metrics_;
  RequestLog& request_log_;
  std::string request_id_;
  Clock::time_point arrival_;
  std::vector<std::optional<Clock::time_point>> last_token_;
  RequestTimes times_;                          // the engine's queued / first-scheduled times
  std::optional<Clock::time_point> first_token_at_, last_token_at_;  // over all choices
  int64_t completion_tokens_ = 0;
  bool first_token_seen_ = false;
  bool recorded_ = false;
};

}  // namespace striker::server
