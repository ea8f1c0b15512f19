#include "untrusted_launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness_protocol.h"
#include "error.h"
#include "install_paths.h"
#include "shown_tree.h"

extern char** environ;

namespace densefeed {
namespace {

std::string mib(std::uint64_t bytes) {
  return bytes % (1ull << 30) == 0 ? fmt::format("{} GiB", bytes >> 30) : fmt::format("{} MiB", bytes >> 20);
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The value of `key` in a flat-keyed cgroup file ("oom_kill 3\n", "max 2\n"); 0 when absent.
std::uint64_t keyed(const std::filesystem::path& file, const std::string& key) {
  std::istringstream in(read_text(file));
  std::string k;
  std::uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

// This process's cgroup in the v1 hierarchy of `controller` (/proc/self/cgroup
// "N:pids:/a/b"), as a folder; empty when that hierarchy is not mounted at
// /sys/fs/cgroup/<controller>.
std::filesystem::path own_v1_cgroup(const std::string& controller) {
  std::istringstream in(read_text("/proc/self/cgroup"));
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    std::istringstream names(line.substr(a + 1, b - a - 1));
    for (std::string n; std::getline(names, n, ',');) {
      if (n != controller) continue;
      const auto root = std::filesystem::path("/sys/fs/cgroup") / controller;
      if (!std::filesystem::exists(root / "cgroup.procs")) return {};
      return root / line.substr(b + 2);
    }
  }
  return {};
}

std::atomic<std::uint64_t> g_cgroup_counter{0};

// A cgroup (v1 pids and memory hierarchies) for one command: every process
// the command starts is in it, whatever session or group it moves to, so it
// can be counted, limited and ended. Where densefeed may not make one (not
// root, cgroup v2 only, read-only cgroupfs), each part is simply absent and
// the rlimits of launch_untrusted stand in.
class CommandCgroup {
 public:
  CommandCgroup(const CommandLimits* limits) {
    const std::string name = fmt::format("densefeed-{}-{}", ::getpid(), g_cgroup_counter++);
    if (const auto parent = own_v1_cgroup("pids"); !parent.empty()) {
      pids_ = make(parent / name, limits ? std::vector<std::pair<std::string, std::string>>{{"pids.max", std::to_string(limits->processes)}}
                                         : std::vector<std::pair<std::string, std::string>>{});
    }
    if (limits) {
      if (const auto parent = own_v1_cgroup("memory"); !parent.empty()) {
        std::vector<std::pair<std::string, std::string>> settings = {{"memory.limit_in_bytes", std::to_string(limits->memory_bytes)}};
        if (std::filesystem::exists(parent / "memory.memsw.limit_in_bytes")) {
          settings.emplace_back("memory.memsw.limit_in_bytes", std::to_string(limits->memory_bytes));
        }
        memory_ = make(parent / name, settings);
      }
    }
    for (auto* dir : {&pids_, &memory_}) {
      if (dir->empty()) continue;
      const int fd = ::open((*dir / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
      if (fd >= 0) fds_.push_back(fd);
      else dir->clear();
    }
  }
  ~CommandCgroup() {
    kill_all();
    for (int fd : fds_) ::close(fd);
    for (const auto* dir : {&pids_, &memory_}) {
      if (dir->empty()) continue;
      for (int i = 0; i < 200 && ::rmdir(dir->c_str()) != 0 && errno == EBUSY; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  }
  CommandCgroup(const CommandCgroup&) = delete;
  CommandCgroup& operator=(const CommandCgroup&) = delete;

  const std::vector<int>& join_fds() const { return fds_; }
  bool pids() const { return !pids_.empty(); }
  bool memory() const { return !memory_.empty(); }
  bool oom_killed() const {
    return memory() && (keyed(memory_ / "memory.oom_control", "oom_kill") > 0);
  }
  bool pids_max_hit() const { return pids() && keyed(pids_ / "pids.events", "max") > 0; }

  // SIGKILLs every process still in the cgroup, again until none is left:
  // one that forks and exits between two reads is found in the next, for
  // its child is in the cgroup too (the "hopper"). Reaps those densefeed
  // adopted (it is their subreaper). Returns how many it killed.
  std::size_t kill_all() {
    std::size_t killed = 0;
    const auto& dir = pids() ? pids_ : memory_;
    if (dir.empty()) return 0;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      std::istringstream in(read_text(dir / "cgroup.procs"));
      std::vector<pid_t> pids;
      for (pid_t p; in >> p;) pids.push_back(p);
      if (pids.empty() || std::chrono::steady_clock::now() > end) break;
      for (pid_t p : pids) {
        if (::kill(p, SIGKILL) == 0) ++killed;
        int status = 0;
        ::waitpid(p, &status, WNOHANG);  // only densefeed's own children: adopted orphans
      }
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    return killed;
  }

 private:
  static std::filesystem::path make(const std::filesystem::path& dir,
                                    const std::vector<std::pair<std::string, std::string>>& settings) {
    if (::mkdir(dir.c_str(), 0755) != 0) return {};
    for (const auto& [file, value] : settings) {
      std::ofstream out(dir / file);
      out << value;
      out.flush();
      if (!out) {
        ::rmdir(dir.c_str());
        return {};
      }
    }
    return dir;
  }

  std::filesystem::path pids_;
  std::filesystem::path memory_;
  std::vector<int> fds_;
};

bool gpu_machine() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    if (e.path().filename().string().rfind("nvidia", 0) == 0) return true;
  }
  return false;
}

bool allowed(const std::string& name, const std::vector<std::string>& allow) {
  for (const auto& a : allow) {
    if (!a.empty() && a.back() == '*' ? name.compare(0, a.size() - 1, a, 0, a.size() - 1) == 0 : name == a) return true;
  }
  return false;
}

// Which limit a failed command most likely ran into, from what the kernel
// says (cgroup counters, SIGXFSZ) and, where it says nothing, what the
// command's own stderr says the failing call returned.
std::string limit_hit(const ProcessResult& p, const CommandCgroup& cg, const CommandLimits& limits, bool rlimit_as,
                      const std::filesystem::path& stderr_path) {
  if (cg.oom_killed()) return fmt::format("the memory limit of {} (cgroup memory.limit_in_bytes; the gate's limits.memory_mb)", mib(limits.memory_bytes));
  if (cg.pids_max_hit()) return fmt::format("the process limit of {} (cgroup pids.max; the gate's limits.processes)", limits.processes);
  if (p.signal == SIGXFSZ) return fmt::format("the file-size limit of {} (RLIMIT_FSIZE; the gate's limits.file_size_mb)", mib(limits.file_size_bytes));
  if (p.ok()) return "";
  const std::string tail = file_tail(stderr_path, 40, 8192);
  const auto says = [&](std::initializer_list<const char*> words) {
    for (const char* w : words) {
      if (tail.find(w) != std::string::npos) return true;
    }
    return false;
  };
  if (says({"File too large", "EFBIG"})) return fmt::format("the file-size limit of {} (RLIMIT_FSIZE; the gate's limits.file_size_mb)", mib(limits.file_size_bytes));
  if (says({"No space left on device", "ENOSPC"})) return fmt::format("the private /tmp limit of {} (the gate's limits.tmp_mb)", mib(limits.tmp_bytes));
  if (rlimit_as && says({"MemoryError", "bad_alloc", "Cannot allocate memory", "out of memory"})) {
    return fmt::format("the memory limit of {} (RLIMIT_AS; the gate's limits.memory_mb)", mib(limits.memory_bytes));
  }
  if (!cg.pids() && says({"Resource temporarily unavailable", "Cannot fork", "can't fork"})) {
    return fmt::format("the process limit of {} (RLIMIT_NPROC; the gate's limits.processes)", limits.processes);
  }
  return "";
}

}  // namespace

std::string UntrustedResult::describe() const {
  return limit.empty() ? process.describe() : fmt::format("{}; it exceeded {}", process.describe(), limit);
}

Failure failure_value(FailureWho who, const UntrustedResult& r) {
  if (!r.process.ok()) return process_failure_value(who, r.process);
  if (!r.limit.empty()) return Failure{FailureKind::limit, who, {}, {}, "", "", r.limit};
  return Failure{};
}

SandboxStatus require_sandbox(bool requested) {
  const SandboxStatus s = sandbox_status(requested);
  if (requested && !s.on()) {
    throw InfraError(fmt::format("the sandbox cannot start, so no untrusted command was run: {}. Install bubblewrap (Debian package "
                                 "bubblewrap) or allow user namespaces here; or, if you accept running the candidate's code "
                                 "unconfined, pass --no-sandbox (recorded in the ledger; audit fails on what it produces)",
                                 s.reason));
  }
  return s;
}

std::vector<std::filesystem::path> workspace_hidden(const Workspace& w) {
  std::vector<std::filesystem::path> out = {w.runs(), w.builds(), w.exports(), w.calibrations(), w.caches(), w.ledger};
  for (const char* suffix : {"-wal", "-shm", "-journal"}) out.push_back(w.ledger.string() + suffix);
  return out;
}

std::map<std::string, std::string> untrusted_environment(const std::map<std::string, std::string>& protocol,
                                                         const ArmContext* arm, const std::filesystem::path& home) {
  std::map<std::string, std::string> env;
  static const std::vector<std::string> always = {"PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES"};
  const std::vector<std::string> none;
  const auto& allow = arm ? arm->env_allow : none;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    const auto eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = entry.substr(0, eq);
    if (allowed(name, always) || allowed(name, allow)) env[name] = entry.substr(eq + 1);
  }
  if (!env.count("PATH")) env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  env["HOME"] = home.string();
  env["TMPDIR"] = home.string();
  if (arm) {
    for (const auto& [k, v] : arm->env) env[k] = v;
    for (const auto& [k, v] : cache_environment(arm->cache_dir)) env[k] = v;
  }
  for (const auto& [k, v] : protocol) env[k] = v;
  return env;
}

std::filesystem::path rank_log(const std::filesystem::path& cwd, int rank, const char* stream) {
  return cwd / "ranks" / fmt::format("rank-{}.{}.log", rank, stream);
}

namespace {

// A multi-rank command made one: `densefeed rank-group` reading `spec_file`,
// in the group's sandbox (rank_group.h says why one), with the ranks'
// log folder writable, the group's timeout a backstop over the ranks' own,
// and the limits scaled by the rank count. Fills `group` (its ranks'
// launchers come later, sandbox_ranks); returns the ranks' own executable.
// Throws InfraError when the ranks' log folder cannot be made.
std::filesystem::path make_rank_group(UntrustedCommand& c, RankGroupSpec& group, const std::filesystem::path& spec_file) {
  const std::size_t n = c.rank_env.size();
  std::error_code ec;
  std::filesystem::create_directories(c.cwd / "ranks", ec);
  if (ec) throw InfraError(fmt::format("{}: cannot create the ranks' log folder: {}", (c.cwd / "ranks").string(), ec.message()));
  group.timeout = c.timeout;
  for (std::size_t k = 0; k < n; ++k) {
    RankCommand r;
    r.argv = c.argv;
    if (c.arm) r.exe_dirs = c.arm->exe_dirs;
    r.env = c.rank_env[k];
    r.cwd = c.cwd;
    r.stdout_path = rank_log(c.cwd, static_cast<int>(k), "stdout");
    r.stderr_path = rank_log(c.cwd, static_cast<int>(k), "stderr");
    group.ranks.push_back(std::move(r));
  }
  const auto rank_exe =
      resolve_executable(c.argv.empty() ? "" : c.argv[0], c.arm ? c.arm->exe_dirs : std::vector<std::filesystem::path>{});
  c.argv = {running_executable().string(), "rank-group", spec_file.string()};
  c.writable.push_back(c.cwd / "ranks");
  // The group ends its ranks at their own timeout and reports which; this
  // one is the backstop for the group itself.
  c.timeout += 2 * kDefaultKillGrace + std::chrono::seconds(5);
  c.limits.memory_bytes *= n;
  c.limits.processes = c.limits.processes * n + 4;
  c.limits.tmp_bytes *= n;
  return rank_exe;
}

// The process of command `c` before its containment: a cleared environment
// (untrusted_environment; HOME and TMPDIR the sandbox's /tmp, else its run
// folder) and its file-size limit.
ProcessSpec process_spec(const UntrustedCommand& c, bool sandboxed) {
  ProcessSpec spec;
  spec.argv = c.argv;
  if (c.arm) spec.exe_dirs = c.arm->exe_dirs;
  spec.cwd = c.cwd;
  spec.stdout_path = c.stdout_path;
  spec.stderr_path = c.stderr_path;
  spec.timeout = c.timeout;
  spec.cancel = c.cancel;
  spec.stdin_fd = c.stdin_fd;
  spec.leader = c.leader;
  spec.pass_fd = c.clock_fd;
  spec.clear_env = true;
  spec.env = untrusted_environment(c.env, c.arm, sandboxed ? std::filesystem::path("/tmp") : c.cwd);
  spec.rlimit_fsize_bytes = c.limits.file_size_bytes;
  return spec;
}

// What the sandbox shows command `c`: its writable folders and its arm's
// compile cache read-write; its arm's folders, interpreter prefix, the
// folders of its executable (and the ranks'), and its run folder read-only.
SandboxPolicy sandbox_policy(const UntrustedCommand& c, const ProcessSpec& spec, const std::filesystem::path& rank_exe) {
  SandboxPolicy policy;
  policy.writable = c.writable;
  // Its revision's compile cache, the one it may write (arm_context.h).
  if (c.arm && !c.arm->cache_dir.empty()) policy.writable.push_back(c.arm->cache_dir);
  policy.readable = c.readable;
  if (c.arm) {
    policy.readable.insert(policy.readable.end(), c.arm->readable.begin(), c.arm->readable.end());
    if (!c.arm->gate_dir.empty()) policy.readable.push_back(c.arm->gate_dir);
    policy.hidden = c.arm->hidden;
    // A virtualenv or conda interpreter lives outside /usr: its prefix.
    if (!c.arm->python.empty() && c.arm->python.string().rfind("/usr/", 0) != 0) {
      policy.readable.push_back(c.arm->python.parent_path().parent_path());
      std::error_code ec;
      const auto real = std::filesystem::canonical(c.arm->python, ec);
      if (!ec && real.string().rfind("/usr/", 0) != 0) policy.readable.push_back(real.parent_path().parent_path());
    }
  }
  if (const auto exe = resolve_executable(c.argv.empty() ? "" : c.argv[0], spec.exe_dirs); !exe.empty()) {
    policy.readable.push_back(std::filesystem::absolute(exe).parent_path());
  }
  if (!rank_exe.empty()) policy.readable.push_back(std::filesystem::absolute(rank_exe).parent_path());
  if (!c.cwd.empty()) policy.readable.push_back(c.cwd);
  policy.cwd = c.cwd;
  policy.tmp_bytes = c.limits.tmp_bytes;
  return policy;
}

// Every other ledger in what `policy` shows, covered; a unix socket in it
// stops the launch (shown_tree.h): InfraError naming the socket and
// `program` (argv[0] of the command as asked for).
void cover_shown_tree(SandboxPolicy& policy, const std::string& program) {
  std::vector<std::filesystem::path> roots;
  for (const auto* list : {&policy.readable, &policy.writable}) {
    for (const auto& p : *list) {
      if (!shown_by_system(p)) roots.push_back(p);
    }
  }
  const ShownTree shown = scan_shown_tree(roots, policy.hidden);
  if (!shown.sockets.empty()) {
    const auto& socket = shown.sockets.front();
    std::filesystem::path root;
    for (const auto& r : roots) {
      const auto rel = socket.lexically_relative(std::filesystem::absolute(r).lexically_normal());
      if (!rel.empty() && *rel.begin() != ".." && r.string().size() > root.string().size()) root = r;
    }
    throw InfraError(fmt::format("{}: a unix socket inside {}, which the sandbox would show to '{}': a sandboxed command could "
                                 "connect to whatever listens on it, so nothing was run{}. Remove it, or move what made it out "
                                 "of that folder",
                                 socket.string(), root.string(), program,
                                 shown.sockets.size() > 1 ? fmt::format(" ({} sockets; this is the first)", shown.sockets.size()) : ""));
  }
  for (const auto& h : shown.hidden) {
    if (std::find(policy.hidden.begin(), policy.hidden.end(), h) == policy.hidden.end()) policy.hidden.push_back(h);
  }
}

// Each rank in a sandbox of its own inside the group's: what the group
// shows, with only its own output folder (and its revision's compile
// cache) writable and its own /tmp of the gate's size (`rank_tmp_bytes`,
// the limit before it was scaled for the group).
void sandbox_ranks(SandboxPolicy& policy, const UntrustedCommand& c, std::uint64_t rank_tmp_bytes, RankGroupSpec& group) {
  policy.role = SandboxRole::group;
  for (std::size_t k = 0; k < group.ranks.size(); ++k) {
    SandboxPolicy rank = policy;
    rank.role = SandboxRole::rank;
    rank.writable.clear();
    if (const auto out = c.rank_env[k].find(kOutEnv); out != c.rank_env[k].end()) rank.writable.emplace_back(out->second);
    if (c.arm && !c.arm->cache_dir.empty()) rank.writable.push_back(c.arm->cache_dir);
    rank.tmp_bytes = rank_tmp_bytes;
    group.ranks[k].launcher = sandbox_argv(rank);
  }
}

// A folder the sandbox mounts, gone before bwrap reached it, stops the
// launch before the command starts: densefeed's failure, found by
// looking, never read from what was printed. Throws InfraError naming it.
void require_mounts_present(const ProcessSpec& spec, const std::string& program) {
  for (const auto& p : sandbox_mounted_paths(spec.launcher)) {
    std::error_code ec;
    if (std::filesystem::symlink_status(p, ec).type() == std::filesystem::file_type::not_found) {
      throw InfraError(fmt::format("{}: removed while the sandbox of '{}' started or ran (it was to be mounted there), so its "
                                   "failure is not counted as the command's; nothing was recorded of it. Run it again; if this "
                                   "repeats, keep what removes folders in the shown tree (another run's ledger, a clean-up) "
                                   "from running meanwhile",
                                   p.string(), program));
    }
  }
}

// A multi-rank command's ranks as its group reported them. Whether it
// passed is the group's own exit status; the report (which a rank could
// have written over) only names the rank that failed, whose result then
// stands for the command's (with the group's wall time and strays).
void read_ranks(const UntrustedCommand& c, UntrustedResult& result) {
  result.ranks = read_rank_outcomes(c.stdout_path);
  if (result.process.ok()) return;
  for (const auto& r : result.ranks) {
    if (r.first && !r.process.ok()) {
      const double wall = result.process.wall_s;
      const std::size_t strays = result.process.strays_killed;
      result.process = r.process;
      result.process.wall_s = wall;
      result.process.strays_killed += strays;
    }
  }
}

}  // namespace

UntrustedResult launch_untrusted(const UntrustedCommand& c_in) {
  UntrustedResult result;
  UntrustedCommand c = c_in;
  const std::string program = c_in.argv.empty() ? "" : c_in.argv[0];
  // The ranks of a multi-rank command: one command, `densefeed rank-group`,
  // in the group's sandbox (rank_group.h says why one), each rank in a
  // sandbox of its own inside it. Their harness's folder is shown as a
  // single rank's would be.
  std::filesystem::path rank_exe;
  const bool ranked = !c.rank_env.empty();
  RankGroupSpec group;
  const auto spec_file = c.cwd / "rank-group.json";
  if (ranked) rank_exe = make_rank_group(c, group, spec_file);
  const SandboxStatus status = require_sandbox(c.sandbox);
  result.sandboxed = status.on();
  ProcessSpec spec = process_spec(c, result.sandboxed);

  CommandCgroup cgroup(&c.limits);
  spec.join_fds = cgroup.join_fds();
  if (c.freeze_join_fd >= 0) spec.try_join_fds.push_back(c.freeze_join_fd);
  // Without a memory cgroup, the address space of each process stands in,
  // except on a GPU machine, where the CUDA driver's reservations exceed
  // any useful bound.
  const bool rlimit_as = !cgroup.memory() && !gpu_machine();
  if (rlimit_as) spec.rlimit_as_bytes = c.limits.memory_bytes;
  std::vector<std::string> parts;
  if (cgroup.memory()) parts.push_back("memory");
  if (cgroup.pids()) parts.push_back("pids");
  result.containment = fmt::format("{}{}{}", result.sandboxed ? "bwrap" : "no sandbox (" + status.reason + ")",
                                   parts.empty() ? "" : fmt::format(", cgroup ({})", fmt::join(parts, ", ")),
                                   rlimit_as ? ", RLIMIT_AS" : "");

  if (result.sandboxed) {
    SandboxPolicy policy = sandbox_policy(c, spec, rank_exe);
    cover_shown_tree(policy, program);
    if (ranked) sandbox_ranks(policy, c, c_in.limits.tmp_bytes, group);
    spec.launcher = sandbox_argv(policy);
    // RLIMIT_NPROC counts the processes of a user in its user namespace: set
    // inside the sandbox (prlimit(1), util-linux), where bwrap made one. As
    // root there is none to count in (and root's count is the machine's).
    if (!cgroup.pids() && ::geteuid() != 0) {
      if (const auto prlimit = resolve_executable("prlimit"); !prlimit.empty()) {
        spec.launcher.insert(spec.launcher.end(), {prlimit.string(), fmt::format("--nproc={}", c.limits.processes), "--"});
        result.containment += ", RLIMIT_NPROC";
      }
    }
  }
  if (ranked) {
    std::ofstream out(spec_file);
    out << rank_group_to_json(group).dump(1) << "\n";
    if (!out) throw InfraError(fmt::format("{}: cannot write the rank group", spec_file.string()));
  }
  result.process = run_process(spec);
  if (result.sandboxed && !result.process.ok()) require_mounts_present(spec, program);
  result.limit = limit_hit(result.process, cgroup, c.limits, rlimit_as, c.stderr_path);
  result.process.strays_killed += cgroup.kill_all();
  if (ranked) read_ranks(c, result);
  return result;
}

}  // namespace densefeed
