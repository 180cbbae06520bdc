// A small fixed-size thread pool for data-parallel loops (matmul rows, attention heads).
// The calling thread takes part in every loop, so a pool of N threads uses N-1 workers.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace striker {

class ThreadPool {
 public:
  // threads <= 0: one per hardware thread.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Calls body(begin, end) over disjoint ranges covering [0, n), at most `grain` items
  // per range, spread over every thread; returns when all are done. The first exception
  // thrown by any body is rethrown here. Not re-entrant: body must not call parallel_for.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

 private:
  void worker_loop();
  void run_ranges();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  bool stopping_ = false;
  uint64_t generation_ = 0;   // bumps once per parallel_for so workers see new work
  int busy_workers_ = 0;
  // The current loop (valid while a parallel_for runs).
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  int64_t n_ = 0, grain_ = 1, next_ = 0;
  std::exception_ptr error_;
};

}  // namespace striker
