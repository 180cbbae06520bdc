// GLM-4.7 tool-call bodies: `<arg_key>k</arg_key><arg_value>v</arg_value>...` to a typed
// JSON `arguments` string, whole (call closed) or as the prefix that is safe to stream
// (reference/chat-format.md §2.3, §2.4 step 3).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_schema.h"

namespace striker {

struct RawArg {
  std::string key;    // stripped
  std::string value;  // exactly as generated, not stripped
  bool open = false;  // the unterminated last value (partial scans only): runs to the end
};

// vLLM's _glm47_arg_converter: every complete key/value pair (the regex
// `<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>` with DOTALL), and with `partial`
// the unterminated last value too. A repeated key keeps its first position and takes the
// last value (Python dict assignment). Text outside pairs is ignored.
std::vector<RawArg> glm47_scan_args(std::string_view body, bool partial);

// One tool call's arguments, typed against its schema.
class ToolArguments {
 public:
  // `schema` is the called tool (nullptr when the request declared none): without
  // properties every value stays a string, as in vLLM.
  ToolArguments(const ToolSchema* schema, const std::vector<RawArg>& args);

  // The complete `arguments` JSON ("{}" when there are none).
  std::string json() const;
  // What may be sent before the call closes: everything up to the last key's `": "`, plus
  // that value while it is an open string of a key typed exactly {"string"} (or of a tool
  // without properties) and without its closing quote. Empty when no pair has started.
  std::string safe_prefix() const;
  // The safe prefix ends inside an open, streamable string value that runs to the end of the
  // body: text appended to the body (no marker) extends the prefix by its JSON escape.
  bool streams_open_tail() const;

 private:
  struct Entry {
    std::string key;
    TypedValue value;
    bool streamable = false;
    bool open = false;
  };
  std::vector<Entry> entries_;
};

}  // namespace striker
