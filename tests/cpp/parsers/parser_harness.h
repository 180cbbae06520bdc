// Drives a Glm47Parser over one output split into chunks, and checks the streaming rules
// every chunking must obey (reference/chat-format.md §2.4, §5.3).
#pragma once
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "chat/glm47_parser.h"
#include "chat/tool_json.h"

namespace striker::test {

struct StreamRun {
  std::vector<Glm47Delta> deltas;  // one per feed, then the finish() delta
  Glm47Message message;
  bool has_tool_calls = false;
  bool cut_inside_call = false;    // the output ended inside a tool call
};

// Deterministic ids so runs over different chunkings can be compared.
inline Glm47ParserOptions with_counter_ids(Glm47ParserOptions options) {
  auto counter = std::make_shared<int>(0);
  options.make_tool_call_id = [counter] { return "chatcmpl-tool-" + std::to_string((*counter)++); };
  return options;
}

inline StreamRun run_chunks(const std::vector<std::string>& chunks, const Glm47ParserOptions& options) {
  Glm47Parser parser(with_counter_ids(options));
  StreamRun run;
  for (const auto& chunk : chunks) run.deltas.push_back(parser.feed(chunk));
  run.cut_inside_call = parser.state() == Glm47State::ToolName || parser.state() == Glm47State::ToolArgs;
  run.deltas.push_back(parser.finish());
  run.message = parser.message();
  run.has_tool_calls = parser.has_tool_calls();
  return run;
}

inline std::vector<std::string> split_at(const std::string& text, const std::vector<size_t>& cuts) {
  std::vector<std::string> chunks;
  size_t prev = 0;
  for (size_t cut : cuts) {
    chunks.push_back(text.substr(prev, cut - prev));
    prev = cut;
  }
  chunks.push_back(text.substr(prev));
  return chunks;
}

inline std::vector<std::string> random_split(const std::string& text, std::mt19937& rng, int max_piece) {
  std::vector<std::string> chunks;
  std::uniform_int_distribution<int> size(1, max_piece);
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = std::min(text.size() - pos, static_cast<size_t>(size(rng)));
    chunks.push_back(text.substr(pos, n));
    pos += n;
  }
  return chunks;
}

inline std::string message_text(const Glm47Message& m) { return glm47_message_json(m).dump(); }

// The rules a client relies on, checked on one run.
// calls_closed=false: the last call was cut by max_tokens, so its streamed arguments stop
// wherever they got to and are not compared with the message's.
inline void check_stream_rules(const StreamRun& run, const std::string& label, bool calls_closed = true) {
  SCOPED_TRACE(label);
  std::string reasoning, content;
  std::vector<std::string> arguments;
  std::vector<bool> named;
  for (const auto& delta : run.deltas) {
    reasoning += delta.reasoning;
    content += delta.content;
    for (const auto& call : delta.tool_calls) {
      ASSERT_GE(call.index, 0);
      if (static_cast<size_t>(call.index) == named.size()) {
        // A new call: indices grow one by one and the first delta carries id and name.
        ASSERT_FALSE(call.id.empty()) << "first delta of call " << call.index << " has no id";
        ASSERT_FALSE(call.name.empty());
        named.push_back(true);
        arguments.emplace_back();
      } else {
        ASSERT_LT(static_cast<size_t>(call.index), named.size()) << "index skipped";
        ASSERT_TRUE(call.id.empty()) << "id sent twice for call " << call.index;
        ASSERT_TRUE(call.name.empty());
        ASSERT_TRUE(call.arguments.has_value()) << "delta without a name or arguments";
      }
      if (call.arguments) {
        ASSERT_FALSE(call.arguments->empty()) << "empty arguments fragment";
        arguments[call.index] += *call.arguments;
      }
    }
    // One delta never names the same call twice (fragments are coalesced).
    for (size_t i = 0; i < delta.tool_calls.size(); ++i)
      for (size_t j = i + 1; j < delta.tool_calls.size(); ++j)
        ASSERT_NE(delta.tool_calls[i].index, delta.tool_calls[j].index);
  }
  const auto& msg = run.message;
  EXPECT_EQ(reasoning, msg.reasoning.value_or("")) << "streamed reasoning != final reasoning";
  if (msg.tool_calls.empty()) {
    EXPECT_EQ(content, msg.content.value_or("")) << "streamed content != final content";
  } else {
    EXPECT_EQ(std::string(python_strip(content)), msg.content.value_or(""));
  }
  ASSERT_EQ(named.size(), msg.tool_calls.size()) << "streamed calls != final calls";
  for (size_t i = 0; i < msg.tool_calls.size(); ++i) {
    if (!calls_closed && i + 1 == msg.tool_calls.size()) break;
    EXPECT_EQ(arguments[i], msg.tool_calls[i].arguments) << "call " << i << " arguments";
  }
}

}  // namespace striker::test
