// One output stream of a command (stdout or stderr): a pipe whose bytes go
// to a log file up to a cap and are counted and dropped beyond it. The bytes
// move with splice(2), kernel to kernel, so a harness writing a gibibyte costs
// densefeed neither that memory nor a copy through it.
#pragma once

#include <cstdint>
#include <filesystem>

namespace densefeed {

struct CaptureCounts {
  std::uint64_t bytes = 0;    // written by the process to the stream in total
  std::uint64_t dropped = 0;  // beyond the cap: counted, not stored
};

class OutputCapture {
 public:
  // Creates (truncates) `log_path` and a pipe, both ends close-on-exec.
  // Throws InfraError naming the file if either cannot be made.
  OutputCapture(const std::filesystem::path& log_path, std::uint64_t cap_bytes);
  ~OutputCapture();
  OutputCapture(const OutputCapture&) = delete;
  OutputCapture& operator=(const OutputCapture&) = delete;

  // The end the child gets as its stdout or stderr (dup2 it there).
  int write_fd() const { return write_fd_; }
  // densefeed's copy of the write end, closed once the child has it, so that
  // end of file comes when the child's last holder closes it.
  void close_write_end();
  int read_fd() const { return read_fd_; }
  bool at_eof() const { return eof_; }

  // Moves what is in the pipe now, without blocking. Returns true if
  // anything moved or end of file was reached.
  bool drain();
  // Drains, closes the pipe (a writer that is still alive gets EPIPE) and,
  // when bytes were dropped, ends the log with a line saying how many.
  CaptureCounts finish();
  const CaptureCounts& counts() const { return counts_; }

 private:
  bool move_to(int out_fd, std::uint64_t max_bytes, std::uint64_t& moved);

  std::filesystem::path path_;
  std::uint64_t cap_ = 0;
  int read_fd_ = -1;
  int write_fd_ = -1;
  int log_fd_ = -1;
  int null_fd_ = -1;
  bool eof_ = false;
  bool finished_ = false;
  CaptureCounts counts_;
};

}  // namespace densefeed
