#include "tool_run.h"

#include <stdlib.h>

#include <fstream>

#include "error.h"
#include "process_runner.h"

namespace densefeed {

namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

ToolResult run_tool(const std::vector<std::string>& argv, const std::filesystem::path& cwd, const std::map<std::string, std::string>& env,
                    std::uint64_t fsize_limit, std::chrono::milliseconds timeout, std::uint64_t cap) {
  char dir[] = "/tmp/densefeed-tool-XXXXXX";
  if (::mkdtemp(dir) == nullptr) throw InfraError("cannot make a scratch folder under /tmp");
  const std::filesystem::path scratch(dir);
  ProcessSpec spec;
  spec.argv = argv;
  spec.cwd = cwd;
  spec.env = env;
  spec.stdout_path = scratch / "out";
  spec.stderr_path = scratch / "err";
  spec.timeout = timeout;
  spec.rlimit_fsize_bytes = fsize_limit;
  spec.output_cap_bytes = cap;
  const ProcessResult r = run_process(spec);
  ToolResult t{r.ok(), r.started && !r.timed_out && r.signal == 0 ? r.exit_code : -1, read_all(spec.stdout_path), read_all(spec.stderr_path),
               r.signal, r.ok() ? "" : argv.front() + " " + r.describe()};
  std::filesystem::remove_all(scratch);
  return t;
}

std::map<std::string, std::string> git_foreign_repository_env() {
  return {{"GIT_CONFIG_COUNT", "1"}, {"GIT_CONFIG_KEY_0", "safe.directory"}, {"GIT_CONFIG_VALUE_0", "*"}, {"GIT_TERMINAL_PROMPT", "0"}};
}

}  // namespace densefeed
