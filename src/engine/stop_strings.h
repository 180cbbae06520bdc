// Stop strings on streamed text: a match may span any number of tokens, the stop string and
// everything after it are dropped, and text that could still become a stop string is held
// back until it cannot.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace striker {

class StopStringFilter {
 public:
  explicit StopStringFilter(std::vector<std::string> stops);

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

  std::vector<std::string> stops_;
  std::string held_;                     // text not yet emitted
  bool done_ = false;
};

}  // namespace striker
