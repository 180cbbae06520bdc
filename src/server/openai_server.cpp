#include "server/openai_server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>
#include <thread>

#include "server/api_error.h"
#include "engine/grammar/grammar_cache.h"
#include "server/serving_context.h"
#include "server/web_assets.h"

namespace striker::server {

namespace {
// This worker thread's current request was counted in unwritten_ and its response is not yet written.
thread_local bool t_response_unwritten = false;

constexpr const char* kVersion = "0.1.0";
constexpr size_t kMaxHeaders = 256;
constexpr size_t kMaxHeaderBytes = 64 * 1024;

void send_error(httplib::Response& res, int status, const std::string& type, const std::string& message,
                const std::string& param = "") {
  res.status = status;
  res.set_content(dump_json(error_body(status, type, message, param)), "application/json");
}

// Compares without an early exit, so the key cannot be guessed byte by byte from timings.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

}  // namespace

OpenAIServer::OpenAIServer(ServerOptions options)
    : options_(std::move(options)), request_log_(options_.log_requests) {
  if (options_.served_model_names.empty()) throw Error("serve: at least one served model name is required");
  loading_metrics_ = std::make_shared<ServerMetrics>(options_.served_model_names.front(), 0, options_.cache);
  http_ = std::make_unique<httplib::Server>();
  const size_t threads = options_.http_threads;
  // Every streaming client holds one worker for its whole response, so the pool is sized for
  // many concurrent streams rather than for the CPU count.
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(30, 0);
  http_->set_write_timeout(30, 0);
  http_->set_keep_alive_timeout(5);
  http_->set_keep_alive_max_count(1000);
  // Streamed tokens are small writes: without TCP_NODELAY, Nagle's algorithm holds one back until
  // the client acknowledges the previous one (up to a delayed-ACK timeout). uvicorn, which vLLM
  // serves through, sets it too.
  http_->set_tcp_nodelay(true);
  register_routes();
}

OpenAIServer::~OpenAIServer() { stop(); }

std::shared_ptr<ServingContext> OpenAIServer::context() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ctx_;
}

std::shared_ptr<ServerMetrics> OpenAIServer::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ctx_ ? ctx_->metrics_owner : loading_metrics_;
}

namespace {
constexpr size_t kGrammarCacheSize = 64;  // compiled structured-output grammars kept warm
// /v1/responses kept for retrieval and previous_response_id: the most recent ones within both bounds.
constexpr size_t kStoredResponses = 1000;
constexpr size_t kStoredResponseBytes = size_t(128) << 20;
}  // namespace

void OpenAIServer::attach(Engine& engine, const Tokenizer& tokenizer, const ChatTemplate* chat_template,
                          ServerOptions options) {
  if (options.served_model_names.empty()) options.served_model_names = options_.served_model_names;
  auto metrics = std::make_shared<ServerMetrics>(options.served_model_names.front(), options.max_model_len, options.cache);
  auto ctx = std::shared_ptr<ServingContext>(
      new ServingContext{engine, tokenizer, chat_template, std::move(options), metrics, *metrics, request_log_, {}, {}, {}, nullptr, nullptr});
  // The vocabulary's byte trie for grammar masks: built once, shared by every compiled grammar.
  ctx->grammars = std::make_shared<grammar::GrammarCache>(
      std::make_shared<grammar::TokenVocabulary>(tokenizer, ctx->options.limits.vocab_size), kGrammarCacheSize);
  ctx->responses = std::make_shared<ResponseStore>(kStoredResponses, kStoredResponseBytes);
  std::lock_guard<std::mutex> lock(mu_);
  ctx_ = std::move(ctx);
}

int OpenAIServer::start(const std::string& host, int port) {
  int bound = port;
  if (port == 0) {
    bound = http_->bind_to_any_port(host);
    if (bound < 0) throw Error("serve: cannot bind " + host + " to any port");
  } else if (!http_->bind_to_port(host, port)) {
    throw Error("serve: cannot listen on " + host + ":" + std::to_string(port) + " (address in use or not available)");
  }
  auto listening = std::make_shared<std::atomic<bool>>(false);
  listener_ = std::thread([this, listening] {
    http_->listen_after_bind();
    *listening = true;  // also set when the loop ended at once, so start() cannot wait forever
  });
  // httplib's stop() is a no-op until the listener has marked itself running, so a stop()
  // right after start() (a model that fails to load at once) would otherwise hang in join.
  while (!http_->is_running() && !*listening) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!http_->is_running()) {
    listener_.join();
    throw Error("serve: the HTTP listener on " + host + ":" + std::to_string(bound) + " stopped at once");
  }
  port_ = bound;
  return bound;
}

void OpenAIServer::request_stop() {
  abort_in_flight();  // whatever still runs ends now, with an error its client can see
  if (http_) http_->stop();
}

bool OpenAIServer::running() const { return http_ && http_->is_running(); }

void OpenAIServer::begin_drain() { draining_ = true; }

void OpenAIServer::abort_in_flight() {
  if (auto ctx = context()) ctx->stopping = true;
}

void OpenAIServer::close_client_connections() {
  if (port_ >= 0) shutdown_connections(port_);
}

int OpenAIServer::in_flight() const {
  auto ctx = context();
  return ctx ? ctx->in_flight.count() : 0;
}

bool OpenAIServer::wait_idle(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto ctx = context();
  while (ctx && ctx->in_flight.count() + ctx->admitting.count() + unwritten_.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void OpenAIServer::stop() {
  request_stop();
  wait();
}

void OpenAIServer::wait() {
  // Several threads may wait (a signal thread and main); only one may join.
  std::lock_guard<std::mutex> lock(join_mu_);
  if (listener_.joinable()) listener_.join();
}

void OpenAIServer::register_routes() {
  using Handler = void (*)(const ServingContext&, const httplib::Request&, httplib::Response&);
  auto model_route = [this](const char* name, Handler fn) {
    return [this, name, fn](const httplib::Request& req, httplib::Response& res) {
      auto ctx = context();
      // Counted before the drain flag is read, so a drain that sees no request in flight cannot
      // miss one that was already admitted.
      std::optional<InFlight::Ticket> ticket;
      if (ctx) ticket.emplace(ctx->admitting.enter());
      if (!ctx) {
        send_error(res, 503, "ServiceUnavailableError", "the model is still loading");
      } else if (draining_) {
        const ApiError e = draining_error();
        send_error(res, e.status(), e.type(), e.what());
      } else {
        try {
          fn(*ctx, req, res);
        } catch (const ApiError& e) {
          send_error(res, e.status(), e.type(), e.what(), e.param());
        } catch (const Error& e) {
          send_error(res, 400, "BadRequestError", e.what());
        } catch (const std::bad_alloc&) {
          send_error(res, 500, "InternalServerError", "out of memory while handling the request");
        } catch (const std::exception& e) {
          send_error(res, 500, "InternalServerError", e.what());
        }
      }
      // A handler that only set content leaves status -1, which httplib sends as 200.
      metrics()->record_http(name, res.status == -1 ? 200 : res.status);
    };
  };
  http_->Post("/v1/chat/completions", model_route("/v1/chat/completions", handle_chat_completions));
  http_->Post("/v1/completions", model_route("/v1/completions", handle_completions));
  http_->Post("/v1/responses", model_route("/v1/responses", handle_responses));
  http_->Post("/v1/messages", model_route("/v1/messages", handle_messages));
  http_->Post("/v1/messages/count_tokens", model_route("/v1/messages/count_tokens", handle_count_tokens));
  http_->Get(R"(/v1/responses/([A-Za-z0-9_\-]+))", model_route("/v1/responses/{id}", handle_get_response));
  http_->Delete(R"(/v1/responses/([A-Za-z0-9_\-]+))", model_route("/v1/responses/{id}", handle_delete_response));
  http_->Post("/tokenize", model_route("/tokenize", handle_tokenize));
  http_->Post("/detokenize", model_route("/detokenize", handle_detokenize));
  http_->Post("/v1/chat/completions/render",
              model_route("/v1/chat/completions/render", handle_chat_completions_render));
  http_->Post("/v1/completions/render", model_route("/v1/completions/render", handle_completions_render));

  // vLLM's POST /reset_prefix_cache: 200 with {"success": false} when requests still hold blocks.
  http_->Post("/reset_prefix_cache", [this](const httplib::Request&, httplib::Response& res) {
    auto ctx = context();
    if (!ctx) {
      send_error(res, 503, "ServiceUnavailableError", "the model is still loading");
    } else {
      try {
        const bool ok = ctx->engine.reset_prefix_cache();
        if (!ok) std::fprintf(stderr, "striker serve: prefix cache not reset: running requests still hold KV blocks\n");
        res.set_content(dump_json({{"success", ok}}), "application/json");
      } catch (const Error& e) {
        send_error(res, 503, "ServiceUnavailableError", e.what());
      }
    }
    metrics()->record_http("/reset_prefix_cache", res.status);
  });

  auto health = [this](const httplib::Request&, httplib::Response& res) {
    if (draining_) {
      send_error(res, 503, "ServiceUnavailableError", "the server is shutting down");
    } else if (context()) {
      res.status = 200;
    } else {
      send_error(res, 503, "ServiceUnavailableError", "the model is still loading");
    }
  };
  http_->Get("/health", health);
  // vLLM's /ping (GET and POST): /health under the name SageMaker-style hosts probe.
  http_->Get("/ping", health);
  http_->Post("/ping", health);
  // vLLM's GET /load: the requests in flight with --enable-server-load-tracking, else 0.
  http_->Get("/load", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump_json({{"server_load", options_.track_server_load ? in_flight() : 0}}), "application/json");
  });
  http_->Get("/version", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump_json({{"version", kVersion}}), "application/json");
  });
  http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const auto created = std::time(nullptr);
    auto ctx = context();
    const ServerOptions& opts = ctx ? ctx->options : options_;
    nlohmann::json data = nlohmann::json::array();
    for (const auto& name : opts.served_model_names) {
      data.push_back({{"id", name},
                      {"object", "model"},
                      {"created", created},
                      {"owned_by", "striker"},
                      {"root", opts.model_root},
                      {"parent", nullptr},
                      {"max_model_len", opts.max_model_len},
                      {"permission",
                       {{{"id", "modelperm-" + random_hex_id()},
                         {"object", "model_permission"},
                         {"created", created},
                         {"allow_create_engine", false},
                         {"allow_sampling", true},
                         {"allow_logprobs", true},
                         {"allow_search_indices", false},
                         {"allow_view", true},
                         {"allow_fine_tuning", false},
                         {"organization", "*"},
                         {"group", nullptr},
                         {"is_blocking", false}}}}});
    }
    res.set_content(dump_json({{"object", "list"}, {"data", data}}), "application/json");
  });
  // The chat page: static files compiled into the binary. The policy header keeps the page to this
  // server (no CDN, no other origin), whatever a model's output contains.
  for (const WebAsset& asset : web_assets()) {
    std::string pattern;  // httplib routes are regular expressions: match the dots literally
    for (char c : asset.route) pattern += c == '.' ? std::string("\\.") : std::string(1, c);
    http_->Get(pattern, [&asset](const httplib::Request&, httplib::Response& res) {
      res.set_header("Content-Security-Policy", "default-src 'self'");
      res.set_header("Cache-Control", "no-cache");
      res.set_content(asset.bytes.data(), asset.bytes.size(), std::string(asset.content_type));
    });
  }
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    auto ctx = context();
    const EngineStats stats = ctx ? ctx->engine.stats() : EngineStats{};
    res.set_content(metrics()->render(stats), "text/plain; version=0.0.4; charset=utf-8");
  });

  // --api-key guards every route except the probes that orchestrators call unauthenticated.
  // Called once the response, a whole stream included, has been written.
  http_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    request_log_.end(req, res);
    if (t_response_unwritten) {
      t_response_unwritten = false;
      unwritten_.fetch_sub(1);
    }
  });
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    request_log_.begin(req);
    // A drain waits for this response's bytes too, not only for its handler: httplib writes a body after the
    // handler returned (and releases its tickets), and close_client_connections' shutdown(SHUT_RD) makes
    // httplib 0.11's writes fail, so a drain that closed the connections then cut answers mid-write (the
    // client saw the headers, then a broken connection). httplib runs a request's routing, write and logger
    // on one worker thread, so a thread-local flag pairs this count with the logger's.
    if (!t_response_unwritten) {
      t_response_unwritten = true;
      unwritten_.fetch_add(1);
    }
    // No response is compressed (vLLM compresses none either): httplib gzips every text/* body for
    // a client that accepts it, SSE included unless the type is the bare "text/event-stream", and
    // zlib then holds a stream's tokens back until its buffer fills. Dropping the header before
    // httplib reads it is the only switch 0.11 has; the request object is httplib's own, not const.
    const_cast<httplib::Request&>(req).headers.erase("Accept-Encoding");
    // httplib 0.11 caps each header line (8 KiB) but not their number; refuse floods here.
    size_t header_bytes = 0;
    for (const auto& [k, v] : req.headers) header_bytes += k.size() + v.size() + 4;
    if (req.headers.size() > kMaxHeaders || header_bytes > kMaxHeaderBytes) {
      send_error(res, 431, "BadRequestError",
                 "request headers too large (" + std::to_string(req.headers.size()) + " headers, " +
                     std::to_string(header_bytes) + " bytes; limits " + std::to_string(kMaxHeaders) + " and " +
                     std::to_string(kMaxHeaderBytes) + ")");
      return httplib::Server::HandlerResponse::Handled;
    }
    // Browsers ask before cross-origin calls, without the API key: answered here, before the key check.
    if (options_.cors.answer_preflight(req, res)) return httplib::Server::HandlerResponse::Handled;
    options_.cors.add_headers(req, res);
    // The page's files hold nothing secret; the page sends the key with its API calls.
    const bool page = std::any_of(web_assets().begin(), web_assets().end(),
                                  [&req](const WebAsset& a) { return a.route == req.path; });
    if (options_.api_key.empty() || is_probe_path(req.path) || page) {
      return httplib::Server::HandlerResponse::Unhandled;
    }
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    // Anthropic's clients send the key as x-api-key (llama-server takes it too).
    const bool ok = (auth.rfind(prefix, 0) == 0 && same_secret(auth.substr(prefix.size()), options_.api_key)) ||
                    (req.has_header("x-api-key") && same_secret(req.get_header_value("x-api-key"), options_.api_key));
    if (ok) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, 401, "authentication_error",
               "Unauthorized: a valid API key is required (Authorization: Bearer KEY, or x-api-key: KEY)");
    metrics()->record_http(req.path, 401);
    return httplib::Server::HandlerResponse::Handled;
  });
  // httplib's own rejections (unknown route, oversized body, malformed request line) get the same
  // JSON error shape as ours; responses that already carry a body are left alone.
  http_->set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 404) {
      send_error(res, 404, "NotFoundError", "no route for " + req.method + " " + req.path);
    } else if (res.status == 413) {
      send_error(res, 413, "BadRequestError", "request body is too large");
    } else {
      send_error(res, res.status, "BadRequestError", "malformed HTTP request (" + std::to_string(res.status) + ")");
    }
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, 500, "InternalServerError", what);
  });
}

}  // namespace striker::server
