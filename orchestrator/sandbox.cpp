#include "sandbox.h"

#include <unistd.h>

#include <mutex>

#include <fmt/format.h>

#include "process_runner.h"

namespace densefeed {
namespace {

std::filesystem::path bwrap_path() { return resolve_executable("bwrap"); }

// What every sandboxed command gets, before its own folders (bwrap applies
// the mount options in order: later binds show through earlier tmpfs).
// private_tmp: an empty, writable /tmp of its own. When densefeed's own state
// (checkout, ledger, runs) lies under /tmp, an empty /tmp would hide it
// instead of showing it read-only, so /tmp stays the real one, read-only,
// and the command gets a writable TMPDIR in its run folder instead.
std::vector<std::string> base_argv(const std::filesystem::path& bwrap, bool private_tmp) {
  std::vector<std::string> argv = {bwrap.string(), "--ro-bind", "/", "/", "--dev", "/dev"};
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    if (e.path().filename().string().rfind("nvidia", 0) == 0) {
      argv.insert(argv.end(), {"--dev-bind", e.path().string(), e.path().string()});
    }
  }
  argv.insert(argv.end(), {"--proc", "/proc"});
  if (private_tmp) argv.insert(argv.end(), {"--tmpfs", "/tmp"});
  return argv;
}

void add_namespaces(std::vector<std::string>& argv) {
  // No --new-session: it would call setsid and take the command out of the
  // process group that densefeed signals at its timeout.
  argv.insert(argv.end(), {"--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                           "--die-with-parent", "--cap-drop", "ALL"});
}

SandboxStatus probe() {
  SandboxStatus status;
  const auto bwrap = bwrap_path();
  if (bwrap.empty()) {
    status.mode = SandboxMode::unavailable;
    status.reason = "bwrap not found (install the Debian package bubblewrap)";
    return status;
  }
  const auto truth = resolve_executable("true");
  auto argv = base_argv(bwrap, true);
  argv.insert(argv.end(), {"--chdir", "/"});
  add_namespaces(argv);
  argv.insert(argv.end(), {"--", truth.empty() ? "/bin/true" : truth.string()});
  char name[] = "/tmp/densefeed-bwrap-probe-XXXXXX";
  const int fd = ::mkstemp(name);
  if (fd >= 0) ::close(fd);
  ProcessSpec spec;
  spec.argv = argv;
  spec.cwd = "/";
  spec.stdout_path = "/dev/null";
  spec.stderr_path = fd >= 0 ? std::filesystem::path(name) : std::filesystem::path("/dev/null");
  spec.timeout = std::chrono::seconds(30);
  const ProcessResult r = run_process(spec);
  const std::string said = fd >= 0 ? file_tail(name, 1, 512) : "";
  if (fd >= 0) std::filesystem::remove(name);
  if (r.ok()) {
    status.mode = SandboxMode::on;
  } else {
    status.mode = SandboxMode::unavailable;
    status.reason = fmt::format("{} cannot start a sandbox here ({}{})", bwrap.string(), r.describe(), said.empty() ? "" : ": " + said);
  }
  return status;
}

}  // namespace

std::string SandboxStatus::text() const {
  switch (mode) {
    case SandboxMode::on: return "on";
    case SandboxMode::off: return "off: " + reason;
    case SandboxMode::unavailable: return "unavailable: " + reason;
  }
  return "?";
}

SandboxStatus sandbox_status(bool requested) {
  if (!requested) return {SandboxMode::off, "--no-sandbox"};
  static std::once_flag once;
  static SandboxStatus probed;
  std::call_once(once, [] { probed = probe(); });
  return probed;
}

SandboxPolicy harness_policy(const std::filesystem::path& run_dir, const std::filesystem::path& exe,
                             const std::filesystem::path& private_dir, std::vector<std::filesystem::path> readable) {
  SandboxPolicy policy;
  policy.writable = {run_dir / "out"};
  policy.readable = std::move(readable);
  policy.readable.push_back(run_dir);
  if (!exe.empty()) policy.readable.push_back(exe.parent_path());
  policy.hidden = {private_dir};
  policy.cwd = run_dir;
  return policy;
}

std::vector<std::string> sandbox_argv(const SandboxPolicy& policy) {
  const auto under_tmp = [](const std::filesystem::path& p) {
    const auto a = std::filesystem::absolute(p).lexically_normal().string();
    return a == "/tmp" || a.rfind("/tmp/", 0) == 0;
  };
  bool state_in_tmp = under_tmp(policy.cwd);
  for (const auto* list : {&policy.writable, &policy.readable, &policy.hidden}) {
    for (const auto& p : *list) state_in_tmp = state_in_tmp || under_tmp(p);
  }
  auto argv = base_argv(bwrap_path(), !state_in_tmp);
  std::error_code ec;
  for (const auto& p : policy.hidden) {
    if (std::filesystem::is_directory(p, ec)) argv.insert(argv.end(), {"--tmpfs", p.string()});
  }
  for (const auto& p : policy.readable) {
    if (std::filesystem::exists(p, ec)) argv.insert(argv.end(), {"--ro-bind", p.string(), p.string()});
  }
  if (state_in_tmp && !policy.cwd.empty()) {
    // After the hidden folders are covered, or they would cover it.
    const auto tmp = policy.cwd / "tmp";
    std::filesystem::create_directories(tmp, ec);
    argv.insert(argv.end(), {"--bind", tmp.string(), tmp.string(), "--setenv", "TMPDIR", tmp.string()});
  }
  for (const auto& p : policy.writable) {
    if (std::filesystem::exists(p, ec)) argv.insert(argv.end(), {"--bind", p.string(), p.string()});
  }
  if (!policy.cwd.empty()) argv.insert(argv.end(), {"--chdir", policy.cwd.string()});
  add_namespaces(argv);
  argv.push_back("--");
  return argv;
}

}  // namespace densefeed
