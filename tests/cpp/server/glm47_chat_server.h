// A test fixture base: an OpenAIServer on a free local port with the glm47 tool-call and reasoning
// parsers, a ScriptedEngine that replays `script`, a byte tokenizer, the given chat template and an
// HTTP client to it. Shared by the chat-route tests.
#pragma once
#include <httplib.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>

#include "chat/chat_template.h"
#include "fakes.h"
#include "server/openai_server.h"

namespace striker::testing {

class Glm47ChatServer : public ::testing::Test {
 protected:
  Glm47ChatServer(std::string script, std::unique_ptr<ChatTemplate> chat_template, int http_threads)
      : engine{std::move(script), 0}, tmpl(std::move(chat_template)) {
    engine.stop_at_script_end = true;
    server::ServerOptions o;
    o.served_model_names = {"m"};
    o.max_model_len = 1024;
    o.limits.vocab_size = 256;
    o.limits.max_model_len = 1024;
    o.limits.max_n = 4;
    o.http_threads = http_threads;
    o.enable_auto_tool_choice = true;
    o.tool_call_parser = "glm47";
    o.reasoning_parser = "glm47";
    server = std::make_unique<server::OpenAIServer>(o);
    port = server->start("127.0.0.1", 0);
    server->attach(engine, tok, tmpl.get(), o);
    client = std::make_unique<httplib::Client>("127.0.0.1", port);
    client->set_read_timeout(10, 0);
  }
  ~Glm47ChatServer() override {
    server->stop();
    engine.shutdown();
  }

  ScriptedEngine engine;
  ByteTokenizer tok;
  std::unique_ptr<ChatTemplate> tmpl;
  std::unique_ptr<server::OpenAIServer> server;
  std::unique_ptr<httplib::Client> client;
  int port = 0;
};

}  // namespace striker::testing
