#include "outside_clock.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
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
    case ClockProtocolError::unstamped: return "unstamped";
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
    if (!records[i].sent_ns) {
      return broken(ClockProtocolError::unstamped, fmt::format("record {} ('{}') came without the kernel's timestamp", i, want));
    }
    if (want == 'e') {
      const std::int64_t ns = *records[i].sent_ns - *records[i - 1].sent_ns;
      if (ns < 0) {
        return broken(ClockProtocolError::unstamped,
                      fmt::format("record {} ('e') was stamped {} ns before its 'b' (the machine's clock was stepped)", i, -ns));
      }
      const double ms = static_cast<double>(ns) / 1e6;
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
  // Two stamps of one clock tick (an empty call on a coarse clock) give 0;
  // keep the samples positive for the statistics.
  for (double& v : r.timed_ms) v = std::max(v, 1e-6);
  return r;
}

OutsideClock::OutsideClock() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    throw InfraError(fmt::format("socketpair for the outside clock: {}", std::strerror(errno)));
  }
  own_fd_ = fds[0];
  child_fd_ = fds[1];
  const int on = 1;
  if (::setsockopt(own_fd_, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) != 0) {
    const int e = errno;
    ::close(own_fd_), ::close(child_fd_);
    throw InfraError(fmt::format("SO_TIMESTAMPNS on the outside clock's socket: {}", std::strerror(e)));
  }
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
    // One message per recvmsg (SOCK_SEQPACKET), with its stamp in the
    // control data; a message longer than buf is cut (MSG_TRUNC), and its
    // bytes here are already more than the protocol allows.
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
    iovec io{buf, sizeof buf};
    msghdr m{};
    m.msg_iov = &io;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    const ssize_t got = ::recvmsg(own_fd_, &m, 0);
    if (got == 0) {
      eof_ = true;
      return;
    }
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      eof_ = true;
      return;
    }
    std::optional<std::int64_t> sent;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS && c->cmsg_len >= CMSG_LEN(sizeof(timespec))) {
        timespec t{};
        std::memcpy(&t, CMSG_DATA(c), sizeof t);
        sent = static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
      }
    }
    for (ssize_t i = 0; i < got; ++i) records_.push_back({buf[i], sent});
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
