// The OpenAI-compatible HTTP server (cpp-httplib): /v1/chat/completions, /v1/completions,
// /v1/models, /health, /metrics, /tokenize, /detokenize, /version.
// It listens before the model is loaded (so /health can answer 503 while loading) and starts
// serving model routes once attach() hands it the engine, tokenizer and chat template.
#pragma once
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "chat/chat_template.h"
#include "engine/engine.h"
#include "server/request_log.h"
#include "server/server_options.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
class Server;
}

namespace striker::server {

struct ServingContext;

class OpenAIServer {
 public:
  explicit OpenAIServer(ServerOptions options);
  ~OpenAIServer();

  // `options` here only needs the HTTP settings (names, API key, threads, body limit).
  // Binds host:port (port 0 = any free port) and starts answering on a background thread.
  // Returns the bound port; throws striker::Error when the address cannot be bound.
  int start(const std::string& host, int port);
  // Makes the model routes live with the final options (model limits, sampling defaults known
  // only after loading). The referenced objects must outlive the server.
  void attach(Engine& engine, const Tokenizer& tokenizer, const ChatTemplate* chat_template, ServerOptions options);
  void stop();          // request_stop() + wait()
  void request_stop();  // returns at once; safe from any thread
  void wait();          // blocks until the listener has ended (any number of threads may wait)
  bool running() const;  // the listener is still accepting
  bool ready() const { return context() != nullptr; }  // attach() was called

  // Graceful drain, as vLLM's --shutdown-timeout: from begin_drain() on, /health and every new
  // model request answer 503 (so routers and Kubernetes stop sending here) while requests already
  // running go on. wait_idle() returns true once none is left, false when `timeout` passed
  // first. abort_in_flight() ends the running ones now, each client getting a 503 (in-band for a
  // stream), so a wait_idle() after it returns within ~50 ms. All are safe from any thread.
  void begin_drain();
  bool draining() const { return draining_.load(); }
  bool wait_idle(std::chrono::milliseconds timeout) const;
  void abort_in_flight();
  int in_flight() const;
  // Closes the clients' kept-alive connections (see shutdown_connections), so stop() does not
  // wait out their keep-alive timeout. Call once nothing is in flight.
  void close_client_connections();

 private:
  void register_routes();
  std::shared_ptr<ServingContext> context() const;

  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  mutable std::mutex mu_;
  std::mutex join_mu_;
  std::shared_ptr<ServingContext> ctx_;  // null while loading
  std::shared_ptr<ServerMetrics> loading_metrics_;  // what /metrics shows before attach()
  RequestLog request_log_;
  std::atomic<bool> draining_{false};
  std::atomic<int> unwritten_{0};  // requests routed whose response httplib has not finished writing
  int port_ = -1;  // the bound port, once start() returned
  std::shared_ptr<ServerMetrics> metrics() const;
};

}  // namespace striker::server
