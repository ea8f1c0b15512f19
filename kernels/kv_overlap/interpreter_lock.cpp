#include "interpreter_lock.h"

namespace densefeed::kv_overlap {

void InterpreterLock::acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::uint64_t ticket = next_ticket_++;
  if (serving_ == ticket) return;
  ++waiters_;
  changed_.notify_all();  // wait_for_waiters
  changed_.wait(lock, [&] { return serving_ == ticket; });
  --waiters_;
}

void InterpreterLock::release() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    ++serving_;
  }
  changed_.notify_all();
}

void InterpreterLock::yield_turn() {
  std::unique_lock<std::mutex> lock(mutex_);
  const std::uint64_t ticket = next_ticket_++;
  ++serving_;
  if (serving_ == ticket) return;  // nobody was waiting
  ++waiters_;
  changed_.notify_all();
  changed_.wait(lock, [&] { return serving_ == ticket; });
  --waiters_;
}

std::size_t InterpreterLock::waiters() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return waiters_;
}

void InterpreterLock::wait_for_waiters(std::size_t n) const {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return waiters_ >= n; });
}

}  // namespace densefeed::kv_overlap
