// vLLM-compatible glm47 reasoning + tool parser for one choice (reference/chat-format.md
// §2–§4). Feed the text deltas as the engine produces them (detokenized with special tokens
// kept, split anywhere); each call returns the OpenAI-shaped delta to stream. After finish(),
// message() gives the non-streaming message. Streaming and non-streaming use the same
// object, so `feed(all); finish(); message()` is the non-streaming path.
//
// Per choice in the server (options from glm47_options_from_request, glm47_request.h):
//   Glm47Parser parser(options);
//   on each engine delta:  auto d = parser.feed(choice.new_text);
//                          if (!d.empty()) send chunk with delta = glm47_delta_json(d);
//   when the choice ends:  auto d = parser.finish();  finish_reason =
//                          glm47_finish_reason("stop"|"length", parser.has_tool_calls(), options.tool_choice);
//                          send d (may be empty) with finish_reason in the same chunk.
//   non-streaming:         parser.message() -> glm47_message_json(...).
// The engine must detokenize with special tokens kept: `<think>` / `<tool_call>` / ... are
// special tokens and are matched here as text.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/glm47_lexer.h"
#include "chat/tool_schema.h"

namespace striker {

struct Glm47ParserOptions {
  // The effective chat_template_kwargs enable thinking (see glm47_thinking_enabled): the
  // prompt then ends in `<think>`, so output starts inside reasoning.
  bool thinking = true;
  // The prompt already closed its think block (glm47_is_reasoning_end over the prompt is true
  // while thinking is on): output starts in content. The server sets it for
  // continue_final_message, where the prompt ends inside the continued assistant message;
  // vLLM's parsers look at the generated text only and would call that continuation reasoning.
  bool reasoning_ended_in_prompt = false;
  // Request `include_reasoning` (default true): false removes reasoning from every output.
  bool include_reasoning = true;
  // The server runs with --tool-call-parser glm47 (and --enable-auto-tool-choice for auto).
  // When false, tool markup stays plain content.
  bool tool_parser_enabled = true;
  ToolChoice tool_choice;   // kind None: calls are never returned
  // With tool_choice none, markup the model still writes is dropped (vLLM's engine parser);
  // false keeps it as content (vLLM ≤ 0.23 behaviour, easier to debug).
  bool drop_tool_markup_when_none = true;
  bool parallel_tool_calls = true;  // false: only the call with index 0 is returned
  ToolSet tools;                    // the request's tools: names are validated, args typed
  // Tool-call ids; default "chatcmpl-tool-" + 16 random hex digits, as vLLM.
  std::function<std::string()> make_tool_call_id;
};

// vLLM Glm47MoeParser: thinking is on unless `thinking` / `enable_thinking` is given in the
// effective chat_template_kwargs, in which case it is on when either is truthy (Python bool).
bool glm47_thinking_enabled(const nlohmann::json& chat_template_kwargs);

// vLLM's is_reasoning_end over the prompt (used to decide when a structured-output grammar
// starts): the last think marker in the prompt decides; without one, "ended" iff thinking
// is off. GLM-4.7 prompts with thinking on end in `<think>`, so they report false.
bool glm47_is_reasoning_end(std::string_view prompt_text, bool thinking);

struct ToolCallDelta {
  int index = 0;
  std::string id;    // set on the call's first delta only, together with name (type "function")
  std::string name;
  std::optional<std::string> arguments;  // a fragment; absent on a name-only delta
};

// What one feed produced. Empty fields are absent from the OpenAI delta.
struct Glm47Delta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

struct ParsedToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text
};

struct Glm47Message {
  std::optional<std::string> content;
  std::optional<std::string> reasoning;
  std::vector<ParsedToolCall> tool_calls;
};

class Glm47Parser {
 public:
  explicit Glm47Parser(Glm47ParserOptions options);

  // Streaming: the delta for this piece of text (often empty while a marker is pending).
  Glm47Delta feed(std::string_view text);
  // End of output (stop, length or abort): releases held text. Call once.
  Glm47Delta finish();
  // The non-streaming message (valid after finish()): content joined from all content text
  // and stripped when calls were returned; reasoning with trailing whitespace removed;
  // empty -> null. required / named tool_choice give content "" instead of null (vLLM).
  Glm47Message message() const;

  // A call was returned to the client: with engine finish "stop" this makes the
  // finish_reason "tool_calls" (see glm47_finish_reason).
  bool has_tool_calls() const;
  Glm47State state() const { return lexer_.state(); }

 private:
  enum class ToolMarkup { Parse, Drop, AsContent };
  struct Call {
    std::string name_raw;
    std::string body;       // raw `<arg_key>...` text
    bool name_done = false;
    bool accepted = false;  // a declared name and tool parsing active
    int index = -1;
    std::string id, name;
    const ToolSchema* schema = nullptr;
    bool closed = false;
    std::string final_arguments;
    std::string sent;       // argument text already streamed
    size_t scanned_size = 0;       // body size at the last safe-prefix computation
    bool marker_since_scan = true; // a marker changed the body's structure since then
    bool tail_streams = false;     // the last scan ended in an open streamable string
    bool synced = true;            // `sent` equals the last computed safe prefix
  };

  void process(const std::vector<Glm47Event>& events, Glm47Delta& delta);
  void on_content(const std::string& text, Glm47Delta& delta);
  void on_reasoning(const std::string& text, Glm47Delta& delta);
  void emit_text(bool reasoning, const std::string& text, Glm47Delta& delta);
  void complete_name(Call& call, Glm47Delta& delta);
  void close_call(Call& call, Glm47Delta& delta);
  void stream_open_arguments(Glm47Delta& delta);
  void emit_arguments(const Call& call, const std::string& fragment, Glm47Delta& delta);
  bool visible(const Call& call) const;
  Glm47Delta start_delta();
  std::string new_tool_call_id();

  Glm47ParserOptions options_;
  ToolMarkup markup_;
  Glm47Lexer lexer_;
  std::mt19937_64 rng_;
  std::string utf8_pending_;       // a code point cut between feeds

  std::vector<Call> calls_;
  int accepted_calls_ = 0;
  bool tool_event_in_feed_ = false;
  std::vector<std::pair<bool, std::string>> deferred_;  // (is_reasoning, text) for the next delta

  std::string reasoning_;          // everything emitted as reasoning
  std::string reasoning_ws_;       // trailing whitespace held until more reasoning follows
  std::string content_;            // all content text, for message()
  std::string content_ws_;         // leading whitespace-only content, held
  bool content_started_ = false;   // non-whitespace content was emitted
  bool finished_ = false;
};

// finish_reason for a choice (vLLM resolve_finish_reason): "tool_calls" only when calls were
// returned, the engine stopped by itself ("stop") and the caller did not force one named
// function; otherwise the engine's reason ("stop", "length", ...).
std::string glm47_finish_reason(const std::string& engine_reason, bool has_tool_calls, const ToolChoice& choice);

// The OpenAI `delta` object for a chunk: {"reasoning", "content", "tool_calls"} as present;
// `reasoning_content` duplicates `reasoning` when asked (older clients).
nlohmann::ordered_json glm47_delta_json(const Glm47Delta& delta, bool with_reasoning_content = false);

// The non-streaming `message` object in vLLM's field order: role, content, refusal,
// annotations, audio, function_call, tool_calls (omitted when empty), reasoning.
nlohmann::ordered_json glm47_message_json(const Glm47Message& message, bool with_reasoning_content = false);

// Convenience for the non-streaming path.
Glm47Message glm47_parse_complete(std::string_view text, Glm47ParserOptions options);

}  // namespace striker
