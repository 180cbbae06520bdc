#include "core/thread_pool.h"

#include <algorithm>

namespace striker {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

// Takes ranges off the shared counter until none are left.
void ThreadPool::run_ranges() {
  for (;;) {
    int64_t begin, end;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (next_ >= n_ || error_) return;
      begin = next_;
      end = std::min(n_, begin + grain_);
      next_ = end;
    }
    try {
      (*body_)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      ++busy_workers_;
    }
    run_ranges();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --busy_workers_;
    }
    done_.notify_all();
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (workers_.empty() || n <= grain) {
    body(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    body_ = &body;
    n_ = n;
    grain_ = grain;
    next_ = 0;
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  run_ranges();
  std::exception_ptr error;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // Every range has been handed out; wait for the workers still inside one.
    done_.wait(lock, [&] { return busy_workers_ == 0; });
    error = error_;
    body_ = nullptr;
    n_ = 0;
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace striker
