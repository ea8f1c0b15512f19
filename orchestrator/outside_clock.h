// The clock outside the kernel's process (issue 26): densefeed's own
// timestamps of every iteration a trusted benchmark driver times.
//
// For each driver round densefeed makes a socket pair (AF_UNIX, SOCK_STREAM)
// and passes one end to the driver as an inherited descriptor, named by the
// environment variable DENSEFEED_CLOCK_FD (kClockFdEnv; the launcher puts it
// at kClockChildFd, the one descriptor above stderr it keeps open). A thread
// of densefeed's reads the other end and takes std::chrono::steady_clock at
// every byte it receives. The protocol, per bracket:
//
//   driver -> densefeed  'b'          densefeed timestamps it, answers 'a'
//   driver             waits for the 'a', then call() and sync()
//   driver -> densefeed  'e'          densefeed timestamps it
//
// The 'b' timestamp is taken before the answer the driver waits for, and the
// 'e' one after the driver wrote it: each outside interval holds the whole
// call and sync, whatever the kernel does to the driver's own clock; what it
// adds beyond them is the bracket's overhead (one round trip and a wake-up
// of the reader thread). A driver first times kEmptyBrackets brackets with
// nothing inside (the overhead, recorded in the bench case's checks), then
// the warm-up iterations, then the timed ones: after the round densefeed
// has exactly kEmptyBrackets + warmup + iters (b, e) pairs in order, or the
// round is red (the driver's clock protocol was broken: a kernel that
// writes to the descriptor, closes it or reads the answers shows this way).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace densefeed {

inline constexpr const char* kClockFdEnv = "DENSEFEED_CLOCK_FD";
inline constexpr int kClockChildFd = 3;
// Brackets with nothing inside that a driver times before its warm-up: the
// overhead figure. 8 is enough for a median the scheduler's odd late wake-up
// does not move (a figure of ours).
inline constexpr int kEmptyBrackets = 8;

// One byte as densefeed's reader thread received it.
struct ClockRecord {
  char byte = 0;
  std::chrono::steady_clock::time_point at;
};

// What a round's records mean, or why they are broken.
enum class ClockProtocolError {
  none,
  too_few,        // fewer (b, e) pairs than the driver was asked to time
  too_many,       // more records than it was asked for
  out_of_order,   // a byte that is not the next expected 'b' or 'e'
  held_open,      // the socket was still open (a process outlived the driver) when densefeed stopped reading
};
const char* to_string(ClockProtocolError e);

struct ClockRound {
  ClockProtocolError error = ClockProtocolError::none;
  std::string reason;                 // for people, when error != none (never parsed)
  std::vector<double> empty_ms;       // kEmptyBrackets intervals, ms
  std::vector<double> timed_ms;       // the `iters` timed intervals, ms (after the warm-up ones)
};

// Reads `records` as kEmptyBrackets + warmup + iters (b, e) pairs. Pure.
ClockRound read_clock_round(const std::vector<ClockRecord>& records, bool held_open, int warmup, int iters);

// One round's socket pair and reader thread. child_fd() goes to the driver's
// launch (UntrustedCommand::clock_fd); after the launch returns, finish()
// closes densefeed's copy of it, reads until every other copy is closed (at
// most `linger` more) and returns the records. Throws InfraError when the
// socket pair cannot be made.
class OutsideClock {
 public:
  OutsideClock();
  ~OutsideClock();
  OutsideClock(const OutsideClock&) = delete;
  OutsideClock& operator=(const OutsideClock&) = delete;

  int child_fd() const { return child_fd_; }
  struct Finished {
    std::vector<ClockRecord> records;
    bool held_open = false;
  };
  Finished finish(std::chrono::milliseconds linger = std::chrono::milliseconds(1000));

 private:
  void read_loop();

  int child_fd_ = -1;
  int own_fd_ = -1;
  std::vector<ClockRecord> records_;
  bool eof_ = false;
  std::chrono::steady_clock::time_point stop_at_ = std::chrono::steady_clock::time_point::max();
  std::atomic_bool stopping_{false};
  std::thread reader_;
};

}  // namespace densefeed
