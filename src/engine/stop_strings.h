// Stop strings on streamed text: a match may span any number of tokens. By default the stop
// string and everything after it are dropped, and text that could still become a stop string is
// held back until it cannot. With include_stop (vLLM's include_stop_str_in_output) the output
// ends right after the stop string and nothing is held back (as vLLM): already-emitted text is
// kept only as a look-back window so a match spanning tokens is still found.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace striker {

class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stops, bool include_stop = false);

  struct Result {
    std::string text;                    // safe to emit now
    std::optional<std::string> matched;  // the stop string that ended the output
  };
  // Feeds decoded text. While not armed (below min_tokens) text passes straight through.
  Result feed(const std::string& text, bool armed);
  // End of output: releases held-back text (still checked for a stop string).
  Result finish(const std::string& tail, bool armed);

 private:
  Result scan(bool at_end);
  Result scan_including(const std::string& text);
  const std::string* earliest_match(size_t* at) const;

  std::vector<std::string> stops_;

  bool include_stop_ = false;
  size_t lookback_ = 0;                  // longest stop string - 1 (include_stop only)
  std::string held_;                     // text not yet emitted; include_stop: the look-back window
  bool done_ = false;
};

}  // namespace striker
