// Download progress on stderr, one file at a time: a bar redrawn in place when stderr is a
// terminal, otherwise one line per file when it is done (logs stay readable).
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace striker::hub {

class DownloadProgress {
 public:
  // `label` names the file ("org/name model.safetensors"); `total` is 0 when unknown.
  void begin(const std::string& label, int64_t total, int64_t resumed_at);
  void update(int64_t done);
  void end(bool ok);

 private:
  void draw(bool final_line);
  std::string label_;
  int64_t total_ = 0, done_ = 0, resumed_at_ = 0;
  bool tty_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace striker::hub
