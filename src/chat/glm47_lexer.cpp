#include "chat/glm47_lexer.h"

namespace striker {

namespace {

std::string_view marker_text(int marker) {
  static constexpr std::string_view kTexts[] = {"<think>",    "</think>",  "<tool_call>", "</tool_call>",
                                                "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"};
  return kTexts[marker];
}

}  // namespace

Glm47Lexer::Glm47Lexer(bool thinking, bool tool_markers, bool reasoning_ended_in_prompt)
    : thinking_(thinking),
      tool_markers_(tool_markers),
      state_(thinking && !reasoning_ended_in_prompt ? Glm47State::Reasoning : Glm47State::Content) {}

// Only markers with a transition from the current state are recognized; any other marker
// text is plain text of the state (e.g. `</think>` inside an argument value).
std::vector<Glm47Lexer::Marker> Glm47Lexer::active_markers() const {
  switch (state_) {
    case Glm47State::Content:
    case Glm47State::Reasoning: {
      std::vector<Marker> markers;
      if (thinking_) markers = {Marker::ThinkStart, Marker::ThinkEnd};
      if (tool_markers_) markers.push_back(Marker::ToolStart);
      return markers;
    }
    case Glm47State::ToolName: return {Marker::KeyStart, Marker::ToolEnd};
    case Glm47State::ToolArgs:
      return {Marker::KeyStart, Marker::KeyEnd, Marker::ValueStart, Marker::ValueEnd, Marker::ToolEnd};
  }
  return {};
}

void Glm47Lexer::emit_text(std::string_view text, std::vector<Glm47Event>& out) const {
  if (text.empty()) return;
  using K = Glm47Event::Kind;
  static constexpr K kByState[] = {K::ContentText, K::ReasoningText, K::ToolNameText, K::ToolArgsText};
  const K kind = kByState[static_cast<int>(state_)];
  // Adjacent text of one kind is merged so consumers see one event per run.
  if (!out.empty() && out.back().kind == kind) {
    out.back().text.append(text);
  } else {
    out.push_back({kind, std::string(text)});
  }
}

void Glm47Lexer::on_marker(Marker marker, std::vector<Glm47Event>& out) {
  using K = Glm47Event::Kind;
  switch (state_) {
    case Glm47State::Content:
      if (marker == Marker::ThinkStart) {
        out.push_back({K::ReasoningStart, {}});
        state_ = Glm47State::Reasoning;
      } else if (marker == Marker::ToolStart) {
        out.push_back({K::ToolCallStart, {}});
        state_ = Glm47State::ToolName;
      }  // a stray `</think>` in content is swallowed
      return;
    case Glm47State::Reasoning:
      if (marker == Marker::ThinkEnd) {
        out.push_back({K::ReasoningEnd, {}});
        state_ = Glm47State::Content;
      } else if (marker == Marker::ToolStart) {
        // A call inside the think block ends reasoning and is a real call (vLLM engine).
        out.push_back({K::ReasoningEnd, {}});
        out.push_back({K::ToolCallStart, {}});
        state_ = Glm47State::ToolName;
      }  // a stray `<think>` in reasoning is swallowed
      return;
    case Glm47State::ToolName:
      out.push_back({K::ToolNameEnd, {}});
      if (marker == Marker::KeyStart) {
        state_ = Glm47State::ToolArgs;
        out.push_back({K::ToolArgsMarker, std::string(marker_text(static_cast<int>(marker)))});
      } else {
        out.push_back({K::ToolCallEnd, {}});
        state_ = Glm47State::Content;
      }
      return;
    case Glm47State::ToolArgs:
      if (marker == Marker::ToolEnd) {
        out.push_back({K::ToolCallEnd, {}});
        state_ = Glm47State::Content;
      } else {
        out.push_back({K::ToolArgsMarker, std::string(marker_text(static_cast<int>(marker)))});
      }
      return;
  }
}

std::vector<Glm47Event> Glm47Lexer::feed(std::string_view text) {
  std::vector<Glm47Event> out;
  held_.append(text);
  size_t pos = 0;
  while (pos < held_.size()) {
    const std::string_view rest = std::string_view(held_).substr(pos);
    const auto markers = active_markers();
    size_t best = std::string_view::npos;
    Marker best_marker = Marker::ThinkStart;
    for (Marker m : markers) {
      const size_t at = rest.find(marker_text(static_cast<int>(m)));
      if (at < best) {
        best = at;
        best_marker = m;
      }
    }
    if (best != std::string_view::npos) {
      emit_text(rest.substr(0, best), out);
      pos += best + marker_text(static_cast<int>(best_marker)).size();
      on_marker(best_marker, out);
      continue;
    }
    // No whole marker: keep the longest tail that is a proper prefix of one.
    size_t keep = 0;
    for (Marker m : markers) {
      const std::string_view mt = marker_text(static_cast<int>(m));
      for (size_t len = std::min(rest.size(), mt.size() - 1); len > keep; --len) {
        if (rest.substr(rest.size() - len) == mt.substr(0, len)) {
          keep = len;
          break;
        }
      }
    }
    emit_text(rest.substr(0, rest.size() - keep), out);
    pos = held_.size() - keep;
    break;
  }
  held_.erase(0, pos);
  return out;
}

std::vector<Glm47Event> Glm47Lexer::finish() {
  std::vector<Glm47Event> out;
  emit_text(held_, out);
  held_.clear();
  return out;
}

}  // namespace striker
