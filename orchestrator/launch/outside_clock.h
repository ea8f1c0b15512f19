// The clock outside the kernel's process (issue 26): densefeed's own
// timestamps of every iteration a trusted benchmark driver times.
//
// For each driver round densefeed makes a socket pair (AF_UNIX,
// SOCK_SEQPACKET) and passes one end to the driver as an inherited
// descriptor, named by the environment variable DENSEFEED_CLOCK_FD
// (kClockFdEnv; the launcher puts it at kClockChildFd, the one descriptor
// above stderr it keeps open). densefeed's end has SO_TIMESTAMPNS set
// (socket(7)): the kernel stamps every message as the driver's write(2)
// enqueues it, before that write returns, and a thread of densefeed's reads
// the stamps with the bytes. The protocol, per bracket:
//
//   driver -> densefeed  'b'     stamped inside the driver's write
//   driver             call() and sync(), its own timer around them
//   driver -> densefeed  'e'     stamped inside the driver's write
//
// By program order the 'b' stamp precedes the call and the 'e' stamp follows
// its sync: each outside interval holds the whole call and sync, whatever
// the kernel does to the driver's own clock, and nothing the process does
// can move a stamp the kernel took (a kernel that writes to the descriptor
// or closes it breaks the protocol, below). The stamps are the kernel's, not
// the reader's: a loaded machine's late wake-up of densefeed's reader thread
// is not in them (with the reader's own timestamps, on the 2-core CI machine,
// honest 0.2 ms iterations read as 0.56 ms). What an interval adds to the
// call is the bracket's overhead: two write(2)s and the driver's timer. A
// driver first times kEmptyBrackets brackets with nothing inside (the
// overhead, recorded in the bench case's checks), then the warm-up
// iterations, then the timed ones: after the round densefeed has exactly
// kEmptyBrackets + warmup + iters (b, e) pairs in order, or the round is red
// (the driver's clock protocol was broken).
//
// The stamps are CLOCK_REALTIME (the only clock SO_TIMESTAMPNS has): an
// interval is a difference of two of them a few ms apart, which NTP's slew
// (at most 500 ppm, adjtimex(2)) changes by under 0.05 %; a step of the
// clock needs CAP_SYS_TIME, which no sandboxed arm has; an interval that
// comes out negative is a broken round (ClockProtocolError::unstamped).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
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

// One byte as densefeed's reader thread received it, with the kernel's
// stamp of the write that sent it (ns since the epoch, CLOCK_REALTIME;
// nullopt where the message had none).
struct ClockRecord {
  char byte = 0;
  std::optional<std::int64_t> sent_ns;
};

// What a round's records mean, or why they are broken.
enum class ClockProtocolError {
  none,
  too_few,        // fewer (b, e) pairs than the driver was asked to time
  too_many,       // more records than it was asked for
  out_of_order,   // a byte that is not the next expected 'b' or 'e'
  held_open,      // the socket was still open (a process outlived the driver) when densefeed stopped reading
  unstamped,      // a message without the kernel's timestamp, or an interval the stamps make negative
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
// socket pair cannot be made or the kernel refuses to stamp its messages.
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
