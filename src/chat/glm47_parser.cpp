#include "chat/glm47_parser.h"

#include <cstdio>

#include "chat/glm47_args.h"
#include "chat/tool_json.h"

namespace striker {

namespace {

bool all_space(std::string_view text) {
  for (char c : text) {
    if (!python_is_space(c)) return false;
  }
  return true;
}

// Python's bool() of a JSON value.
bool python_truthy(const nlohmann::json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

}  // namespace

bool glm47_thinking_enabled(const nlohmann::json& kwargs) {
  if (!kwargs.is_object()) return true;
  const auto get = [&](const char* key) { return kwargs.contains(key) ? kwargs.at(key) : nlohmann::json(); };
  const nlohmann::json thinking = get("thinking"), enable_thinking = get("enable_thinking");
  if (thinking.is_null() && enable_thinking.is_null()) return true;
  return python_truthy(thinking) || python_truthy(enable_thinking);
}

bool glm47_is_reasoning_end(std::string_view prompt_text, bool thinking) {
  if (!thinking) return true;  // no think markers exist at all
  const size_t start = prompt_text.rfind("<think>");
  const size_t end = prompt_text.rfind("</think>");
  if (end != std::string_view::npos && (start == std::string_view::npos || end > start)) return true;
  return false;  // `<think>` last, or no marker while waiting for reasoning
}

Glm47Parser::Glm47Parser(Glm47ParserOptions options)
    : options_(std::move(options)),
      markup_(!options_.tool_parser_enabled                      ? ToolMarkup::AsContent
              : options_.tool_choice.kind != ToolChoiceKind::None ? ToolMarkup::Parse
              : options_.drop_tool_markup_when_none               ? ToolMarkup::Drop
                                                                  : ToolMarkup::AsContent),
      lexer_(options_.thinking, markup_ != ToolMarkup::AsContent, options_.reasoning_ended_in_prompt),
      rng_(std::random_device{}()) {}

std::string Glm47Parser::new_tool_call_id() {
  if (options_.make_tool_call_id) return options_.make_tool_call_id();
  char buf[40];
  std::snprintf(buf, sizeof buf, "chatcmpl-tool-%016llx", static_cast<unsigned long long>(rng_()));
  return buf;
}

bool Glm47Parser::visible(const Call& call) const {
  return call.accepted && (options_.parallel_tool_calls || call.index == 0);
}

bool Glm47Parser::has_tool_calls() const {
  for (const auto& call : calls_) {
    if (visible(call)) return true;
  }
  return false;
}

// Text held back from the previous feed (it followed tool-call bytes) goes first.
Glm47Delta Glm47Parser::start_delta() {
  Glm47Delta delta;
  for (auto& [is_reasoning, text] : deferred_) (is_reasoning ? delta.reasoning : delta.content) += text;
  deferred_.clear();
  tool_event_in_feed_ = false;
  return delta;
}

Glm47Delta Glm47Parser::feed(std::string_view text) {
  Glm47Delta delta = start_delta();
  if (finished_) return delta;
  utf8_pending_.append(text);
  const size_t complete = utf8_complete_prefix(utf8_pending_);
  const std::string ready = utf8_sanitize(std::string_view(utf8_pending_).substr(0, complete));
  utf8_pending_.erase(0, complete);
  process(lexer_.feed(ready), delta);
  stream_open_arguments(delta);
  return delta;
}

Glm47Delta Glm47Parser::finish() {
  Glm47Delta delta = start_delta();
  if (finished_) return delta;
  finished_ = true;
  auto events = lexer_.feed(utf8_sanitize(utf8_pending_));
  utf8_pending_.clear();
  for (auto& e : lexer_.finish()) events.push_back(std::move(e));
  process(events, delta);
  switch (lexer_.state()) {
    case Glm47State::Reasoning: reasoning_ws_.clear(); break;  // trailing whitespace is dropped
    case Glm47State::ToolName: complete_name(calls_.back(), delta); break;
    case Glm47State::ToolArgs: stream_open_arguments(delta); break;  // stops where the args got to
    case Glm47State::Content: break;
  }
  // Leading whitespace-only content survives only when no call was returned.
  if (!content_started_ && !content_ws_.empty() && !has_tool_calls()) emit_text(false, content_ws_, delta);
  content_ws_.clear();
  // Nothing follows, so text deferred in this last step joins the final delta.
  for (auto& [is_reasoning, text] : deferred_) (is_reasoning ? delta.reasoning : delta.content) += text;
  deferred_.clear();
  return delta;
}

void Glm47Parser::process(const std::vector<Glm47Event>& events, Glm47Delta& delta) {
  using K = Glm47Event::Kind;
  for (const auto& event : events) {
    switch (event.kind) {
      case K::ContentText: on_content(event.text, delta); break;
      case K::ReasoningText: on_reasoning(event.text, delta); break;
      case K::ReasoningStart: break;
      case K::ReasoningEnd: reasoning_ws_.clear(); break;
      case K::ToolCallStart: calls_.emplace_back(); break;
      case K::ToolNameText: calls_.back().name_raw += event.text; break;
      case K::ToolNameEnd: complete_name(calls_.back(), delta); break;
      case K::ToolArgsText: calls_.back().body += event.text; break;
      case K::ToolArgsMarker:
        calls_.back().body += event.text;
        calls_.back().marker_since_scan = true;
        break;
      case K::ToolCallEnd: close_call(calls_.back(), delta); break;
    }
  }
}

void Glm47Parser::emit_text(bool reasoning, const std::string& text, Glm47Delta& delta) {
  if (text.empty()) return;
  if (reasoning && !options_.include_reasoning) return;
  // Text after tool-call bytes in the same feed waits for the next delta, so a client that
  // applies fields in order never sees it ahead of the call (vLLM _events_to_delta).
  if (tool_event_in_feed_) {
    deferred_.emplace_back(reasoning, text);
  } else {
    (reasoning ? delta.reasoning : delta.content) += text;
  }
}

void Glm47Parser::on_content(const std::string& text, Glm47Delta& delta) {
  content_ += text;
  if (content_started_) return emit_text(false, text, delta);
  // Whitespace before any real content is held: dropped if a call follows.
  if (all_space(text)) {
    content_ws_ += text;
    return;
  }
  content_started_ = true;
  emit_text(false, content_ws_ + text, delta);
  content_ws_.clear();
}

void Glm47Parser::on_reasoning(const std::string& text, Glm47Delta& delta) {
  // Trailing whitespace is held until more reasoning follows and dropped when it ends.
  size_t last = text.size();
  while (last > 0 && python_is_space(text[last - 1])) --last;
  if (last == 0) {
    reasoning_ws_ += text;
    return;
  }
  const std::string body = reasoning_ws_ + text.substr(0, last);
  reasoning_ws_ = text.substr(last);
  reasoning_ += body;
  emit_text(true, body, delta);
}

void Glm47Parser::complete_name(Call& call, Glm47Delta& delta) {
  if (call.name_done) return;
  call.name_done = true;
  call.name = std::string(python_strip(call.name_raw));
  if (markup_ != ToolMarkup::Parse || call.name.empty() || !options_.tools.accepts_name(call.name)) return;
  call.accepted = true;
  call.index = accepted_calls_++;
  call.id = new_tool_call_id();
  call.schema = options_.tools.find(call.name);
  if (!visible(call)) return;
  if (!content_started_) content_ws_.clear();
  delta.tool_calls.push_back({call.index, call.id, call.name, std::nullopt});
  tool_event_in_feed_ = true;
}

void Glm47Parser::emit_arguments(const Call& call, const std::string& fragment, Glm47Delta& delta) {
  if (fragment.empty()) return;
  // Several fragments of one call in one feed are coalesced into one entry.
  for (auto& entry : delta.tool_calls) {
    if (entry.index == call.index) {
      entry.arguments = entry.arguments.value_or("") + fragment;
      return;
    }
  }
  delta.tool_calls.push_back({call.index, "", "", fragment});
  tool_event_in_feed_ = true;
}

void Glm47Parser::stream_open_arguments(Glm47Delta& delta) {
  if (calls_.empty()) return;
  Call& call = calls_.back();
  if (call.closed || !visible(call) || (call.body.size() == call.scanned_size && !call.marker_since_scan)) return;
  if (!call.marker_since_scan && call.synced) {
    // Only text was appended: it extends the open string value, or changes nothing sent
    // (see ToolArguments::streams_open_tail). This keeps a long value linear in its size.
    if (call.tail_streams) {
      const std::string quoted = python_json_string(std::string_view(call.body).substr(call.scanned_size));
      const std::string fragment = quoted.substr(1, quoted.size() - 2);
      emit_arguments(call, fragment, delta);
      call.sent += fragment;
    }
  } else {
    const ToolArguments args(call.schema, glm47_scan_args(call.body, true));
    const std::string prefix = args.safe_prefix();
    call.tail_streams = args.streams_open_tail();
    // Only an extension of what was sent can be streamed.
    call.synced = prefix.compare(0, call.sent.size(), call.sent) == 0;
    if (call.synced && prefix.size() > call.sent.size()) {
      emit_arguments(call, prefix.substr(call.sent.size()), delta);
      call.sent = prefix;
    }
    call.synced = call.synced && prefix.size() == call.sent.size();
  }
  call.scanned_size = call.body.size();
  call.marker_since_scan = false;
}

void Glm47Parser::close_call(Call& call, Glm47Delta& delta) {
  call.closed = true;
  if (!call.accepted) return;
  call.final_arguments = ToolArguments(call.schema, glm47_scan_args(call.body, false)).json();
  if (!visible(call)) return;
  // A repeated key can rewrite a value already sent; the stream then cannot be repaired
  // and the non-streaming message stays the authority.
  if (call.final_arguments.compare(0, call.sent.size(), call.sent) == 0) {
    emit_arguments(call, call.final_arguments.substr(call.sent.size()), delta);
    call.sent = call.final_arguments;
  }
}

Glm47Message Glm47Parser::message() const {
  Glm47Message msg;
  for (const auto& call : calls_) {
    if (!visible(call)) continue;
    const std::string arguments =
        call.closed ? call.final_arguments : ToolArguments(call.schema, glm47_scan_args(call.body, false)).json();
    msg.tool_calls.push_back({call.id, call.name, arguments});
  }
  std::string content = msg.tool_calls.empty() ? content_ : std::string(python_strip(content_));
  if (!content.empty()) msg.content = std::move(content);
  const auto kind = options_.tool_choice.kind;
  if ((kind == ToolChoiceKind::Required || kind == ToolChoiceKind::Named) && markup_ == ToolMarkup::Parse &&
      !msg.content)
    msg.content = "";
  if (options_.include_reasoning && !reasoning_.empty()) msg.reasoning = reasoning_;
  return msg;
}

Glm47Message glm47_parse_complete(std::string_view text, Glm47ParserOptions options) {
  Glm47Parser parser(std::move(options));
  parser.feed(text);
  parser.finish();
  return parser.message();
}

}  // namespace striker
