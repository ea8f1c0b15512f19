// The process-wide lock of the modelled serving process, standing for an
// interpreter's global lock (CPython's GIL): one holder at a time, and every
// thread is served in the order it asked. First come, first served is what
// CPython's GIL does on a forced switch (FORCE_SWITCHING in
// Python/ceval_gil.c: the dropping thread waits until a waiter has taken the
// lock instead of barging back in), and it is what makes the harness's trace
// deterministic: a thread that asks while the lock is held gets it at the
// holder's very next release, however late the scheduler wakes it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace densefeed::kv_overlap {

class InterpreterLock {
 public:
  // Blocks until every thread that asked earlier has had and released the lock.
  void acquire();
  // The caller must hold the lock.
  void release();
  // Releases the lock and asks for it again in one step (the caller must hold
  // it): every thread already waiting gets exactly one turn before the caller,
  // and a thread that asks later waits for the caller. CPython's forced switch
  // does this: the dropping thread waits until a waiter has taken the lock.
  void yield_turn();
  // Threads inside acquire() that do not hold the lock yet (a snapshot).
  std::size_t waiters() const;
  // Blocks until at least `n` threads are inside acquire() without the lock.
  void wait_for_waiters(std::size_t n) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::uint64_t next_ticket_ = 0;  // ticket of the next thread to ask
  std::uint64_t serving_ = 0;      // ticket of the thread whose turn it is
  std::size_t waiters_ = 0;
};

}  // namespace densefeed::kv_overlap
