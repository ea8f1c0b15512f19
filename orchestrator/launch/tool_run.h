// Trusted helper programs densefeed itself runs (git, tar) with their
// stdout and stderr kept: through the process runner (run_process), which
// starts every process.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace densefeed {

struct ToolResult {
  bool ok = false;   // started and exited 0
  int exit_code = -1;  // its exit code; -1 when it did not start or end by itself (a signal, the timeout)
  std::string out;   // its stdout (at most `cap` bytes)
  std::string err;   // its stderr, as it wrote it
  int signal = 0;    // the signal that ended it (SIGXFSZ: past fsize_limit), 0 when none
  std::string failure;  // how it ended when not ok (ProcessResult::describe()), '' when ok
  // For messages: its stderr, or how it ended when it wrote none.
  std::string what() const { return err.empty() ? failure : err; }
};

// Runs argv in `cwd` with `env` added to densefeed's environment;
// `fsize_limit` (bytes, 0 = none) bounds every file it writes (RLIMIT_FSIZE).
// Never throws for what the program does; InfraError when no scratch folder
// can be made under /tmp.
ToolResult run_tool(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                    const std::map<std::string, std::string>& env = {}, std::uint64_t fsize_limit = 0,
                    std::chrono::milliseconds timeout = std::chrono::minutes(10), std::uint64_t cap = 256ull << 20);

// Git's environment for reading a repository that belongs to another user
// (safe.directory=* from the command line's protected scope) with no prompts.
std::map<std::string, std::string> git_foreign_repository_env();

}  // namespace densefeed
