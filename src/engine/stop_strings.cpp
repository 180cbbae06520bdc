#include "engine/stop_strings.h"

#include <algorithm>

namespace striker {

StopStringFilter::StopStringFilter(std::vector<std::string> stops, bool include_stop) : include_stop_(include_stop) {
  for (auto& s : stops)
    if (!s.empty()) {
      lookback_ = std::max(lookback_, s.size() - 1);
      stops_.push_back(std::move(s));
    }
}

StopStringFilter::Result StopStringFilter::feed(const std::string& text, bool armed) {
  if (done_) return {};
  if (include_stop_) {
    if (stops_.empty()) return {text, std::nullopt};
    if (!armed) {
      // Emitted as is; still remembered so a match that ends once armed is found (vLLM looks back too).
      held_ += text;
      if (held_.size() > lookback_) held_.erase(0, held_.size() - lookback_);
      return {text, std::nullopt};
    }
    return scan_including(text);
  }
  if (stops_.empty() || !armed) {
    // Nothing to look for yet: anything held from before is released in order.
    Result r{held_ + text, std::nullopt};
    held_.clear();
    return r;
  }
  held_ += text;
  return scan(false);
}

StopStringFilter::Result StopStringFilter::finish(const std::string& tail, bool armed) {
  Result r = feed(tail, armed);
  if (done_ || r.matched || include_stop_) return r;  // include_stop holds nothing back
  Result rest = scan(true);
  r.text += rest.text;
  r.matched = rest.matched;
  return r;
}

// The stop string matched earliest in held_ (on equal start the longer one: it covers more) and
// its position in *at; nullptr when none matches.
const std::string* StopStringFilter::earliest_match(size_t* at) const {
  const std::string* best_stop = nullptr;
  for (const auto& s : stops_) {
    const size_t pos = held_.find(s);
    if (pos != std::string::npos && (pos < *at || (pos == *at && s.size() > best_stop->size()))) {
      *at = pos;
      best_stop = &s;
    }
  }
  return best_stop;
}

StopStringFilter::Result StopStringFilter::scan_including(const std::string& text) {
  // held_ is emitted text with no complete match in it, so any match found here ends inside `text`.
  const size_t window = held_.size();
  held_ += text;
  size_t best = std::string::npos;
  const std::string* best_stop = earliest_match(&best);
  Result r;
  if (best_stop) {
    // Keep the stop string, drop what follows it.
    r.text = held_.substr(window, best + best_stop->size() - window);
    r.matched = *best_stop;
    held_.clear();
    done_ = true;
    return r;
  }
  r.text = text;
  if (held_.size() > lookback_) held_.erase(0, held_.size() - lookback_);
  return r;
}

StopStringFilter::Result StopStringFilter::scan(bool at_end) {
  Result r;
  size_t best = std::string::npos;
  const std::string* best_stop = earliest_match(&best);
  if (best_stop) {
    r.text = held_.substr(0, best);
    r.matched = *best_stop;
    held_.clear();
    done_ = true;
    return r;
  }
  if (at_end) {
    r.text = std::move(held_);
    held_.clear();
    return r;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string. Such a suffix
  // starts where a stop string starts, so the cut never splits a UTF-8 character.
  size_t hold = 0;
  for (const auto& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > hold; --len)
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
  }
  r.text = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return r;
}

}  // namespace striker
