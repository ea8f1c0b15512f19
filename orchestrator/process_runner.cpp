#include "process_runner.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>
#include <fstream>
#include <thread>

#include <boost/filesystem.hpp>
#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <fmt/format.h>

#include "error.h"

namespace bp = boost::process;

namespace densefeed {
namespace {

// Process groups now running, for the termination handler. Slots hold a
// pgid or 0; lock-free atomics are async-signal-safe.
std::array<std::atomic<pid_t>, 512> g_groups{};

class GroupRegistration {
 public:
  explicit GroupRegistration(pid_t pgid) {
    for (auto& slot : g_groups) {
      pid_t expected = 0;
      if (slot.compare_exchange_strong(expected, pgid)) {
        slot_ = &slot;
        return;
      }
    }
  }
  ~GroupRegistration() {
    if (slot_) slot_->store(0);
  }
  GroupRegistration(const GroupRegistration&) = delete;
  GroupRegistration& operator=(const GroupRegistration&) = delete;

 private:
  std::atomic<pid_t>* slot_ = nullptr;
};

extern "C" void on_termination(int sig) {
  for (auto& slot : g_groups) {
    const pid_t pgid = slot.load();
    if (pgid > 0) ::kill(-pgid, SIGKILL);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

}  // namespace

std::filesystem::path resolve_executable(const std::string& name, const std::filesystem::path& exe_dir) {
  if (name.find('/') != std::string::npos) return name;
  if (!exe_dir.empty() && std::filesystem::is_regular_file(exe_dir / name)) return exe_dir / name;
  auto local = self_dir() / name;
  if (std::filesystem::is_regular_file(local)) return local;
  auto found = bp::search_path(name);
  return found.empty() ? std::filesystem::path() : std::filesystem::path(found.string());
}

void kill_children_on_termination() {
  struct sigaction action {};
  action.sa_handler = on_termination;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &action, nullptr);
}

std::filesystem::path self_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::current_path() : exe.parent_path();
}

std::string ProcessResult::describe() const {
  if (!started) return "could not start: " + start_error;
  if (timed_out) return fmt::format("timed out after {:.1f} s and was killed", wall_s);
  if (cancelled) return fmt::format("was cancelled after {:.1f} s and killed", wall_s);
  if (signal != 0) return fmt::format("killed by signal {} ({})", signal, sigabbrev_np(signal) ? sigabbrev_np(signal) : "?");
  return fmt::format("exit code {}", exit_code);
}

ProcessResult run_process(const ProcessSpec& spec) {
  ProcessResult result;
  if (spec.argv.empty()) {
    result.start_error = "empty command";
    return result;
  }
  const auto exe = resolve_executable(spec.argv[0], spec.exe_dir);
  if (exe.empty() || access(exe.c_str(), X_OK) != 0) {
    result.start_error = fmt::format("'{}' not found or not executable (looked in {}next to densefeed in {} and in PATH)",
                                     spec.argv[0], spec.exe_dir.empty() ? "" : spec.exe_dir.string() + ", ",
                                     self_dir().string());
    return result;
  }
  result.resolved_exe = exe.string();
  for (const auto& p : {spec.stdout_path, spec.stderr_path}) {
    std::ofstream touch(p, std::ios::trunc);
    if (!touch) throw InfraError(fmt::format("{}: cannot create the log file", p.string()));
  }

  bp::environment env = boost::this_process::environment();
  for (const auto& [k, v] : spec.env) env[k] = v;
  std::vector<std::string> args(spec.argv.begin() + 1, spec.argv.end());

  const auto start = std::chrono::steady_clock::now();
  bp::group group;
  bp::child child;
  std::error_code ec;
  // The child dies with this thread's process even when that is SIGKILLed
  // (which no handler sees): PR_SET_PDEATHSIG, proc(5)/prctl(2).
  const pid_t parent = getpid();
  const auto die_with_parent = bp::extend::on_exec_setup([parent](auto&) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
  });
  child = bp::child(bp::exe = exe.string(), bp::args = args, env, bp::std_in < bp::null,
                    bp::std_out > spec.stdout_path.string(), bp::std_err > spec.stderr_path.string(),
                    bp::start_dir = spec.cwd.string(), group, die_with_parent, ec);
  if (ec) {
    result.start_error = ec.message();
    return result;
  }
  result.started = true;
  const GroupRegistration registration(static_cast<pid_t>(group.native_handle()));

  // Poll rather than wait_for: Boost.Process 1.74's wait_for is unreliable
  // with several children at once.
  const auto deadline = start + spec.timeout;
  auto sleep = std::chrono::milliseconds(1);
  while (child.running(ec) && !ec) {
    const bool cancelled = spec.cancel && spec.cancel->load();
    if (cancelled || std::chrono::steady_clock::now() >= deadline) {
      result.timed_out = !cancelled;
      result.cancelled = cancelled;
      ::kill(-group.native_handle(), SIGTERM);
      const auto grace_end = std::chrono::steady_clock::now() + spec.kill_grace;
      while (child.running(ec) && !ec && std::chrono::steady_clock::now() < grace_end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      break;
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::milliseconds(20));
  }
  // Whatever the leader did, nothing of its group may outlive the case.
  group.terminate(ec);
  child.wait(ec);
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int status = child.native_exit_code();
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  else if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

std::optional<std::string> capture_output(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                                          std::chrono::milliseconds timeout) {
  char name[] = "/tmp/densefeed-capture-XXXXXX";
  const int fd = ::mkstemp(name);
  if (fd < 0) return std::nullopt;
  ::close(fd);
  ProcessSpec spec;
  spec.argv = argv;
  spec.cwd = cwd;
  spec.stdout_path = name;
  spec.stderr_path = "/dev/null";
  spec.timeout = timeout;
  const ProcessResult r = run_process(spec);
  std::ifstream in(name, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(name);
  if (!r.ok()) return std::nullopt;
  return text;
}

std::string file_tail(const std::filesystem::path& path, std::size_t max_lines, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const auto size = static_cast<std::size_t>(in.tellg());
  const std::size_t take = std::min(size, max_bytes);
  in.seekg(static_cast<std::streamoff>(size - take));
  std::string text(take, '\0');
  in.read(text.data(), static_cast<std::streamsize>(take));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  // Keep what follows the max_lines-th newline from the end.
  std::size_t start = text.size();
  for (std::size_t lines = 0; lines < max_lines; ++lines) {
    const std::size_t nl = start == 0 ? std::string::npos : text.rfind('\n', start - 1);
    if (nl == std::string::npos) {
      start = 0;
      break;
    }
    start = nl;
  }
  return start == 0 ? text : text.substr(start + 1);
}

}  // namespace densefeed
