// striker chat: a terminal client for a running OpenAI-compatible server. Streams
// /v1/chat/completions over SSE, shows reasoning dimmed and tool calls as they arrive, and
// keeps the conversation history. /exit or Ctrl-D quits.
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"

namespace striker::cli {

namespace {

// Ordered: the --tools file and the conversation go to the server in the order they were written.
using json = nlohmann::ordered_json;

struct ChatOptions {
  std::string url = "http://127.0.0.1:8000";
  std::string model;
  std::string api_key;
  std::string system;
  bool no_think = false;
  std::string tools_file;
  std::string color = "auto";
  int max_tokens = 0;
  std::optional<double> temperature;  // unset: the server's default (generation_config.json)
};

// "http://host:port/prefix" -> client address and path prefix (a trailing /v1 is dropped so
// both http://h:8000 and http://h:8000/v1 work).
struct BaseUrl {
  std::string scheme_host_port;
  std::string prefix;
};

BaseUrl parse_base_url(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) throw Error("--url " + url + ": expected http://host:port");
  const std::string scheme = url.substr(0, scheme_end);
  if (scheme == "https") throw Error("--url " + url + ": https is not supported by this build (no TLS); use http://");
  if (scheme != "http") throw Error("--url " + url + ": unsupported scheme '" + scheme + "', expected http://");
  const size_t path_start = url.find('/', scheme_end + 3);
  BaseUrl base{url.substr(0, path_start), path_start == std::string::npos ? "" : url.substr(path_start)};
  while (!base.prefix.empty() && base.prefix.back() == '/') base.prefix.pop_back();
  if (base.prefix.size() >= 3 && base.prefix.compare(base.prefix.size() - 3, 3, "/v1") == 0)
    base.prefix.resize(base.prefix.size() - 3);
  if (base.scheme_host_port.size() <= scheme_end + 3) throw Error("--url " + url + ": no host");
  return base;
}

// Server-sent events: bytes in, the `data` of each complete event out.
class SseDecoder {
 public:
  std::vector<std::string> feed(const char* data, size_t size) {
    buffer_.append(data, size);
    std::vector<std::string> events;
    size_t newline;
    while ((newline = buffer_.find('\n')) != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) {  // blank line ends an event
        if (has_data_) events.push_back(data_);
        data_.clear();
        has_data_ = false;
      } else if (line.rfind("data:", 0) == 0) {
        std::string value = line.substr(5);
        if (!value.empty() && value[0] == ' ') value.erase(0, 1);
        if (has_data_) data_ += "\n";
        data_ += value;
        has_data_ = true;
      }  // comments (":") and other fields are ignored
    }
    return events;
  }

 private:
  std::string buffer_;
  std::string data_;
  bool has_data_ = false;
};

struct StreamedCall {
  std::string id, name, arguments;
};

// Prints one streamed assistant turn and rebuilds the message for the history.
class TurnPrinter {
 public:
  TurnPrinter(std::ostream& out, bool color) : out_(out), color_(color) {}

  void on_chunk(const json& chunk) {
    if (chunk.contains("error")) {
      const auto& err = chunk["error"];
      error_ = err.is_object() && err.contains("message") && err["message"].is_string()
                   ? err["message"].get<std::string>()
                   : err.dump();
      return;
    }
    if (!chunk.contains("choices") || !chunk["choices"].is_array() || chunk["choices"].empty()) return;
    const json& choice = chunk["choices"][0];
    const json delta = choice.value("delta", json::object());
    const std::string reasoning = text_field(delta, "reasoning").empty() ? text_field(delta, "reasoning_content")
                                                                         : text_field(delta, "reasoning");
    if (!reasoning.empty()) {
      switch_to(Mode::Reasoning);
      reasoning_ += reasoning;
      out_ << reasoning;
    }
    const std::string content = text_field(delta, "content");
    if (!content.empty()) {
      switch_to(Mode::Content);
      content_ += content;
      out_ << content;
    }
    if (delta.contains("tool_calls") && delta["tool_calls"].is_array()) {
      for (const auto& tc : delta["tool_calls"]) on_tool_call(tc);
    }
    if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
      finish_reason_ = choice["finish_reason"].get<std::string>();
    out_.flush();
  }

  void end() {
    switch_to(Mode::None);
    if (finish_reason_ == "length") out_ << "[stopped: max tokens reached]\n";
    out_.flush();
  }

  json assistant_message() const {
    json msg = {{"role", "assistant"}, {"content", content_}};
    if (!reasoning_.empty()) msg["reasoning_content"] = reasoning_;
    if (!calls_.empty()) {
      msg["tool_calls"] = json::array();
      for (const auto& [index, call] : calls_) {
        msg["tool_calls"].push_back({{"id", call.id},
                                     {"type", "function"},
                                     {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
      }
    }
    return msg;
  }

  const std::string& error() const { return error_; }
  const std::map<int, StreamedCall>& calls() const { return calls_; }

 private:
  enum class Mode { None, Reasoning, Content, Tool };

  static std::string text_field(const json& obj, const char* key) {
    return obj.contains(key) && obj[key].is_string() ? obj[key].get<std::string>() : std::string();
  }

  void on_tool_call(const json& tc) {
    const int index = tc.value("index", 0);
    StreamedCall& call = calls_[index];
    if (tc.contains("id") && tc["id"].is_string()) call.id = tc["id"].get<std::string>();
    const json function = tc.value("function", json::object());
    const std::string name = text_field(function, "name");
    if (!name.empty() || index != current_call_) {
      switch_to(Mode::None);
      switch_to(Mode::Tool);
      call.name += name;
      out_ << "[tool call] " << call.name << " ";
      current_call_ = index;
    }
    const std::string args = text_field(function, "arguments");
    if (!args.empty()) {
      switch_to(Mode::Tool);
      call.arguments += args;
      out_ << args;
    }
  }

  // Separates reasoning, answer and tool calls: a style per part, a newline between parts.
  void switch_to(Mode mode) {
    if (mode == mode_) return;
    if (mode_ != Mode::None) out_ << (color_ ? "\x1b[0m\n" : "\n");
    if (mode == Mode::Reasoning) out_ << (color_ ? "\x1b[2m" : "[thinking] ");
    if (mode == Mode::Tool && color_) out_ << "\x1b[36m";
    mode_ = mode;
  }

  std::ostream& out_;
  bool color_;
  Mode mode_ = Mode::None;
  int current_call_ = -1;
  std::string reasoning_, content_, finish_reason_, error_;
  std::map<int, StreamedCall> calls_;
};

class ChatClient {
 public:
  explicit ChatClient(const ChatOptions& options)
      : options_(options), base_(parse_base_url(options.url)), http_(base_.scheme_host_port) {
    if (!http_.is_valid()) throw Error("--url " + options.url + ": not a usable http address");
    http_.set_connection_timeout(5, 0);
    http_.set_read_timeout(3600, 0);  // a long generation may be silent between events
    if (!options.api_key.empty()) headers_.emplace("Authorization", "Bearer " + options.api_key);
    if (!options.tools_file.empty()) tools_ = read_tools(options.tools_file);
  }

  // Checks the server answers and picks the model (the first served one unless --model).
  std::string connect() {
    auto res = http_.Get((base_.prefix + "/v1/models").c_str(), headers_);
    if (!res) throw Error(unreachable(res.error()));
    // With --model the listing is only a reachability check, unless access is refused.
    const bool refused = res->status == 401 || res->status == 403;
    if (!options_.model.empty() && !refused) return options_.model;
    if (res->status != 200) throw Error("GET /v1/models: " + http_error(res->status, res->body));
    const json models = json::parse(res->body, nullptr, false);
    if (models.is_discarded() || !models.contains("data") || !models["data"].is_array() || models["data"].empty() ||
        !models["data"][0].contains("id"))
      throw Error("GET /v1/models: the server lists no model; pass --model");
    return models["data"][0]["id"].get<std::string>();
  }

  // One streamed request; false when it failed (the error has been printed).
  bool complete(const std::string& model, const json& history, TurnPrinter& printer, std::ostream& err) {
    json body = {{"model", model}, {"messages", history}, {"stream", true}};
    if (options_.no_think) body["chat_template_kwargs"] = {{"enable_thinking", false}};
    if (!tools_.is_null()) body["tools"] = tools_;
    if (options_.max_tokens > 0) body["max_tokens"] = options_.max_tokens;
    if (options_.temperature) body["temperature"] = *options_.temperature;

    httplib::Request req;
    req.method = "POST";
    req.path = base_.prefix + "/v1/chat/completions";
    req.headers = headers_;
    req.headers.emplace("Accept", "text/event-stream");
    req.body = body.dump();
    req.set_header("Content-Type", "application/json");
    int status = 0;
    bool received = false;
    std::string error_body;
    SseDecoder sse;
    bool done = false;
    req.response_handler = [&](const httplib::Response& r) {
      status = r.status;
      return true;
    };
    req.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
      received = true;
      if (status != 200) {
        error_body.append(data, size);
        return true;
      }
      for (const auto& event : sse.feed(data, size)) {
        if (event == "[DONE]") {
          done = true;
          continue;
        }
        const json chunk = json::parse(event, nullptr, false);
        if (!chunk.is_discarded()) printer.on_chunk(chunk);
      }
      return true;
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    const bool sent = http_.send(req, res, error);
    printer.end();
    if (!sent) {
      if (received) err << "error: the connection to " << options_.url << " broke (" << httplib::to_string(error) << ")\n";
      else err << "error: " << unreachable(error) << "\n";
      return false;
    }
    if (status != 200) {
      err << "error: " << http_error(status, error_body.empty() ? res.body : error_body) << "\n";
      return false;
    }
    if (!printer.error().empty()) {
      err << "error: the server reported " << printer.error() << "\n";
      return false;
    }
    if (!done) err << "warning: the stream ended without [DONE]\n";
    return true;
  }

 private:
  std::string unreachable(httplib::Error error) const {
    return "cannot reach the server at " + options_.url + " (" + httplib::to_string(error) + ")";
  }

  static std::string http_error(int status, const std::string& body) {
    const json parsed = json::parse(body, nullptr, false);
    std::string message = body;
    if (!parsed.is_discarded() && parsed.contains("error")) {
      const auto& e = parsed["error"];
      message = e.is_object() && e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>()
                                                                                    : e.dump();
    }
    return "the server answered HTTP " + std::to_string(status) + ": " + message;
  }

  static json read_tools(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw Error("--tools " + path + ": cannot open the file");
    const json tools = json::parse(in, nullptr, false);
    if (tools.is_discarded() || !tools.is_array()) throw Error("--tools " + path + ": expected a JSON array of tools");
    return tools;
  }

  ChatOptions options_;
  BaseUrl base_;
  httplib::Client http_;
  httplib::Headers headers_;
  json tools_;
};

bool read_line(std::istream& in, std::ostream& out, const std::string& prompt, std::string& line) {
  out << prompt << std::flush;
  if (!std::getline(in, line)) {
    out << "\n";
    return false;
  }
  return true;
}

int run_chat(const ChatOptions& options, std::istream& in, std::ostream& out, std::ostream& err) {
  ChatClient client(options);
  const std::string model = client.connect();
  const bool color = options.color == "always" || (options.color == "auto" && isatty(STDOUT_FILENO));
  out << "striker chat: " << options.url << ", model " << model << ". /exit or Ctrl-D quits.\n";
  json history = json::array();
  if (!options.system.empty()) history.push_back({{"role", "system"}, {"content", options.system}});
  std::string line;
  while (read_line(in, out, "> ", line)) {
    if (line == "/exit" || line == "/quit") break;
    if (line.empty()) continue;
    const size_t turn_start = history.size();
    history.push_back({{"role", "user"}, {"content", line}});
    // A turn may take several requests: each answered tool call is sent back.
    while (true) {
      TurnPrinter printer(out, color);
      if (!client.complete(model, history, printer, err)) {
        history.erase(history.begin() + static_cast<std::ptrdiff_t>(turn_start), history.end());
        break;
      }
      history.push_back(printer.assistant_message());
      if (printer.calls().empty()) break;
      for (const auto& [index, call] : printer.calls()) {
        std::string result;
        if (!read_line(in, out, "result of " + call.name + "> ", result)) return 0;
        history.push_back({{"role", "tool"}, {"tool_call_id", call.id}, {"content", result}});
      }
    }
  }
  return 0;
}

}  // namespace

void register_chat(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<ChatOptions>();
  auto* cmd = app.add_subcommand("chat", "Chat in the terminal with a running striker (or any OpenAI-compatible) server");
  cmd->add_option("--url", options->url, "Server address")->capture_default_str();
  cmd->add_option("--model", options->model, "Model name (default: the first one the server lists)");
  cmd->add_option("--api-key", options->api_key, "Bearer token for servers started with --api-key");
  cmd->add_option("--system", options->system, "System prompt");
  cmd->add_flag("--no-think", options->no_think, "Ask for no reasoning (chat_template_kwargs.enable_thinking=false)");
  cmd->add_option("--tools", options->tools_file, "JSON file with an OpenAI `tools` array to offer the model");
  cmd->add_option("--max-tokens", options->max_tokens, "max_tokens per answer (default: the server's)");
  cmd->add_option("--temperature", options->temperature, "sampling temperature, 0 = greedy (default: the server's)")
      ->check(CLI::Range(0.0, 2.0));
  cmd->add_option("--color", options->color, "ANSI styling: auto, always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  cmd->callback([options, &exit_code] { exit_code = run_chat(*options, std::cin, std::cout, std::cerr); });
}

}  // namespace striker::cli
