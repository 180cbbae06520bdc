#include "loaders/hub_progress.h"

#include <unistd.h>

#include <cstdio>
#include <string>

namespace striker::hub {

namespace {

double mib(int64_t bytes) { return double(bytes) / 1048576.0; }

std::string human_size(int64_t bytes) {
  char buf[32];
  if (bytes >= (int64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1 << 30));
  else if (bytes >= (1 << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", mib(bytes));
  else if (bytes >= (1 << 10)) std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024.0);
  else std::snprintf(buf, sizeof buf, "%lld B", (long long)bytes);
  return buf;
}

}  // namespace

void DownloadProgress::begin(const std::string& label, int64_t total, int64_t resumed_at) {
  label_ = label;
  total_ = total;
  done_ = resumed_at_ = resumed_at;
  tty_ = isatty(STDERR_FILENO) != 0;
  start_ = last_draw_ = std::chrono::steady_clock::now();
  if (tty_) draw(false);
}

void DownloadProgress::update(int64_t done) {
  done_ = done;
  const auto now = std::chrono::steady_clock::now();
  // At most ten redraws a second: a fast transfer calls this for every few kilobytes.
  if (!tty_ || now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(false);
}

void DownloadProgress::end(bool ok) {
  if (!ok) {
    if (tty_) std::fputc('\n', stderr);
    std::fflush(stderr);
    return;
  }
  draw(true);
}

void DownloadProgress::draw(bool final_line) {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = secs > 0 ? mib(done_ - resumed_at_) / secs : 0.0;
  std::string resumed = resumed_at_ > 0 ? " (resumed at " + human_size(resumed_at_) + ")" : "";
  if (!tty_) {
    std::fprintf(stderr, "striker: downloaded %s, %s in %.1f s%s\n", label_.c_str(), human_size(done_).c_str(), secs,
                 resumed.c_str());
  } else {
    const int width = 30;
    const int pct = total_ > 0 ? int(100.0 * double(done_) / double(total_)) : 0;
    const int filled = total_ > 0 ? pct * width / 100 : 0;
    std::fprintf(stderr, "\r%s [%s%s] %3d%% %.1f/%.1f MiB %.1f MiB/s%s", label_.c_str(),
                 std::string(size_t(filled), '#').c_str(), std::string(size_t(width - filled), '.').c_str(), pct,
                 mib(done_), mib(total_), rate, final_line ? "\n" : "");
  }
  std::fflush(stderr);
}

}  // namespace striker::hub
