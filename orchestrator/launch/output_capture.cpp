#include "output_capture.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "error.h"

namespace densefeed {
namespace {

// Per splice call: large enough that a flood moves in few calls.
constexpr std::uint64_t kChunk = 1ull << 20;
// Per drain: bounds how long one stream can hold the poll loop while a
// harness keeps its pipe full.
constexpr int kTransfersPerDrain = 64;

}  // namespace

OutputCapture::OutputCapture(const std::filesystem::path& log_path, std::uint64_t cap_bytes)
    : path_(log_path), cap_(cap_bytes) {
  log_fd_ = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd_ < 0) throw InfraError(fmt::format("{}: cannot create the log file: {}", log_path.string(), std::strerror(errno)));
  null_fd_ = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  int fds[2];
  if (null_fd_ < 0 || ::pipe2(fds, O_CLOEXEC) != 0) {
    const std::string why = std::strerror(errno);
    ::close(log_fd_);
    if (null_fd_ >= 0) ::close(null_fd_);
    throw InfraError(fmt::format("{}: cannot make the pipe for this log: {}", log_path.string(), why));
  }
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  ::fcntl(read_fd_, F_SETFL, ::fcntl(read_fd_, F_GETFL) | O_NONBLOCK);
  // A larger pipe means fewer wake-ups under a flood; the default (64 KiB)
  // is fine where the system refuses.
  ::fcntl(read_fd_, F_SETPIPE_SZ, 1 << 20);
}

OutputCapture::~OutputCapture() {
  for (int fd : {read_fd_, write_fd_, log_fd_, null_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

void OutputCapture::close_write_end() {
  if (write_fd_ >= 0) ::close(write_fd_);
  write_fd_ = -1;
}

// One transfer of at most `max_bytes` to `out_fd`: sets `moved`; returns
// false when the pipe is empty for now or at end of file.
bool OutputCapture::move_to(int out_fd, std::uint64_t max_bytes, std::uint64_t& moved) {
  moved = 0;
  const std::size_t want = static_cast<std::size_t>(std::min(max_bytes, kChunk));
  ssize_t n = ::splice(read_fd_, nullptr, out_fd, nullptr, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
  if (n < 0 && (errno == EINVAL || errno == ENOSYS)) {
    // A log on a file system without splice support: copy through a small
    // buffer instead (still never more than this in memory).
    char buffer[1 << 16];
    n = ::read(read_fd_, buffer, std::min(want, sizeof buffer));
    if (n > 0) {
      for (ssize_t done = 0; done < n;) {
        const ssize_t w = ::write(out_fd, buffer + done, static_cast<std::size_t>(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;  // a full disk: the bytes are counted, not stored
        done += w;
      }
    }
  }
  if (n == 0) {
    eof_ = true;
    return false;
  }
  if (n < 0) return false;  // EAGAIN: nothing now; other errors end the same way
  moved = static_cast<std::uint64_t>(n);
  return true;
}

bool OutputCapture::drain() {
  if (read_fd_ < 0 || eof_) return false;
  bool progress = false;
  for (int i = 0; i < kTransfersPerDrain; ++i) {
    std::uint64_t moved = 0;
    const bool keep = counts_.bytes < cap_;
    const bool more = keep ? move_to(log_fd_, cap_ - counts_.bytes, moved) : move_to(null_fd_, kChunk, moved);
    counts_.bytes += moved;
    if (!keep) counts_.dropped += moved;
    progress = progress || moved > 0 || eof_;
    if (!more) break;
  }
  return progress;
}

CaptureCounts OutputCapture::finish() {
  if (finished_) return counts_;
  finished_ = true;
  close_write_end();
  while (drain() && !eof_) {
  }
  if (read_fd_ >= 0) ::close(read_fd_);
  read_fd_ = -1;
  if (counts_.dropped > 0) {
    const std::string note = fmt::format("\n[densefeed: {} more bytes were dropped beyond the {} MiB cap of this log]\n",
                                         counts_.dropped, static_cast<double>(cap_) / (1 << 20));
    [[maybe_unused]] const ssize_t w = ::write(log_fd_, note.data(), note.size());
  }
  return counts_;
}

}  // namespace densefeed
