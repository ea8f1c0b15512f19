#include "outside_clock.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "error.h"

namespace densefeed {

const char* to_string(ClockProtocolError e) {
  switch (e) {
    case ClockProtocolError::none: return "none";
    case ClockProtocolError::too_few: return "too_few";
    case ClockProtocolError::too_many: return "too_many";
    case ClockProtocolError::out_of_order: return "out_of_order";
    case ClockProtocolError::held_open: return "held_open";
  }
  return "unknown";
}

ClockRound read_clock_round(const std::vector<ClockRecord>& records, bool held_open, int warmup, int iters) {
  ClockRound r;
  const std::size_t pairs = static_cast<std::size_t>(kEmptyBrackets + warmup + iters);
  const auto broken = [&](ClockProtocolError e, std::string why) {
    r.error = e;
    r.reason = fmt::format("the driver's clock protocol was broken: {} (densefeed expected {} (b, e) pairs: {} empty, {} warm-up, "
                           "{} timed)", why, pairs, kEmptyBrackets, warmup, iters);
    r.empty_ms.clear();
    r.timed_ms.clear();
    return r;
  };
  for (std::size_t i = 0; i < records.size(); ++i) {
    const char want = i % 2 == 0 ? 'b' : 'e';
    if (i >= 2 * pairs) {
      return broken(ClockProtocolError::too_many, fmt::format("{} records, {} more than asked for (something else wrote to the clock socket)",
                                                              records.size(), records.size() - 2 * pairs));
    }
    if (records[i].byte != want) {
      return broken(ClockProtocolError::out_of_order,
                    fmt::format("record {} is byte 0x{:02x} where '{}' was due (something else wrote to the clock socket)", i,
                                static_cast<unsigned char>(records[i].byte), want));
    }
    if (want == 'e') {
      const double ms = std::chrono::duration<double, std::milli>(records[i].at - records[i - 1].at).count();
      const std::size_t k = i / 2;
      if (k < static_cast<std::size_t>(kEmptyBrackets)) r.empty_ms.push_back(ms);
      else if (k >= static_cast<std::size_t>(kEmptyBrackets + warmup)) r.timed_ms.push_back(ms);
    }
  }
  if (records.size() < 2 * pairs) {
    return broken(ClockProtocolError::too_few, fmt::format("{} records, {} (b, e) pairs complete", records.size(), records.size() / 2));
  }
  if (held_open) {
    return broken(ClockProtocolError::held_open, "the clock socket was still held open after the driver ended (a process outlived it)");
  }
  // A timed interval of 0 cannot happen (the answer lies between 'b' and 'e');
  // a reader woken once for both bytes still gives a positive duration here
  // only if the clock moved, so keep the samples positive for the statistics.
  for (double& v : r.timed_ms) v = std::max(v, 1e-6);
  return r;
}

OutsideClock::OutsideClock() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    throw InfraError(fmt::format("socketpair for the outside clock: {}", std::strerror(errno)));
  }
  own_fd_ = fds[0];
  child_fd_ = fds[1];
  reader_ = std::thread([this] { read_loop(); });
}

OutsideClock::~OutsideClock() {
  if (reader_.joinable()) finish(std::chrono::milliseconds(0));
  if (own_fd_ >= 0) ::close(own_fd_);
}

void OutsideClock::read_loop() {
  char buf[256];
  for (;;) {
    if (stopping_.load() && std::chrono::steady_clock::now() >= stop_at_) return;
    pollfd p{own_fd_, POLLIN, 0};
    const int n = ::poll(&p, 1, stopping_.load() ? 5 : 50);
    if (n <= 0) continue;
    const ssize_t got = ::read(own_fd_, buf, sizeof buf);
    const auto at = std::chrono::steady_clock::now();
    if (got == 0) {
      eof_ = true;
      return;
    }
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      eof_ = true;
      return;
    }
    for (ssize_t i = 0; i < got; ++i) {
      records_.push_back({buf[i], at});
      if (buf[i] == 'b') {
        const char ack = 'a';
        (void)::send(own_fd_, &ack, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      }
    }
  }
}

OutsideClock::Finished OutsideClock::finish(std::chrono::milliseconds linger) {
  if (child_fd_ >= 0) ::close(child_fd_), child_fd_ = -1;
  stop_at_ = std::chrono::steady_clock::now() + linger;
  stopping_ = true;
  if (reader_.joinable()) reader_.join();
  return Finished{std::move(records_), !eof_};
}

}  // namespace densefeed
