// Counts the requests a graceful drain waits for. A request holds a Ticket for as long as it has
// work the client is waiting on (a streamed response outlives its route handler), so the count
// reaching zero means every client has had its whole answer.
#pragma once
#include <atomic>

namespace striker::server {

class InFlight {
 public:
  class Ticket {
   public:
    explicit Ticket(std::atomic<int>& count) : count_(&count) { count_->fetch_add(1); }
    ~Ticket() {
      if (count_) count_->fetch_sub(1);
    }
    Ticket(Ticket&& other) noexcept : count_(other.count_) { other.count_ = nullptr; }
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;
    Ticket& operator=(Ticket&&) = delete;

   private:
    std::atomic<int>* count_;
  };

  Ticket enter() { return Ticket(count_); }
  int count() const { return count_.load(); }

 private:
  std::atomic<int> count_{0};
};

}  // namespace striker::server
