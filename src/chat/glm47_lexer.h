// The GLM-4.7 output state machine (vLLM's glm47_moe_config, reference/chat-format.md
// §2.2) over text that arrives in arbitrary pieces. Markers are matched as text: the server
// detokenizes with special tokens kept, so `<tool_call>` reads the same whether it came as
// its special token or as plain pieces. A piece that could still become a marker is held
// back, so the event stream does not depend on where the text was split.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace striker {

enum class Glm47State { Content, Reasoning, ToolName, ToolArgs };

struct Glm47Event {
  enum class Kind {
    ContentText,    // text of the answer
    ReasoningText,  // text inside the think block
    ReasoningStart, // `<think>` opened reasoning from content
    ReasoningEnd,   // `</think>`, or `<tool_call>` inside reasoning
    ToolCallStart,  // `<tool_call>`
    ToolNameText,   // text of the function name (unstripped)
    ToolNameEnd,    // the name is complete (`<arg_key>` or `</tool_call>` follows)
    ToolArgsText,   // raw body text between markers, exactly as generated
    ToolArgsMarker, // an argument marker inside the body (<arg_key>, </arg_value>, ...)
    ToolCallEnd,    // `</tool_call>`
  };
  Kind kind;
  std::string text;  // for the *Text kinds
};

class Glm47Lexer {
 public:
  // thinking: the think markers exist at all (vLLM drops them when thinking is off, so a
  //   literal `</think>` is then content) and the first state is Reasoning.
  // tool_markers: `<tool_call>` starts a call; when false it stays plain text.
  // reasoning_ended_in_prompt: with thinking on, the prompt already closed its think block
  //   (continue_final_message after `</think>`), so the first state is Content; the think
  //   markers still exist (a later `<think>` opens reasoning).
  Glm47Lexer(bool thinking, bool tool_markers, bool reasoning_ended_in_prompt = false);

  // Consumes `text` and returns the events it completes (possibly none).
  std::vector<Glm47Event> feed(std::string_view text);
  // End of output: text held back as a possible marker is released as text.
  std::vector<Glm47Event> finish();

  Glm47State state() const { return state_; }

 private:
  enum class Marker { ThinkStart, ThinkEnd, ToolStart, ToolEnd, KeyStart, KeyEnd, ValueStart, ValueEnd };
  std::vector<Marker> active_markers() const;
  void emit_text(std::string_view text, std::vector<Glm47Event>& out) const;
  void on_marker(Marker marker, std::vector<Glm47Event>& out);

  bool thinking_;
  bool tool_markers_;
  Glm47State state_;
  std::string held_;  // unconsumed input: a possible marker prefix
};

}  // namespace striker
