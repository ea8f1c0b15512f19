#include "sandbox.h"

#include <unistd.h>

#include <algorithm>
#include <mutex>

#include <fmt/format.h>

#include "process_runner.h"

namespace densefeed {
namespace {

std::filesystem::path bwrap_path() { return resolve_executable("bwrap"); }

bool has_gpu_nodes() {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    if (e.path().filename().string().rfind("nvidia", 0) == 0) return true;
  }
  return false;
}

// The system's read-only runtime: what every sandboxed command gets before
// its own folders (bwrap applies the mount options in order: later binds
// show through earlier tmpfs). Nothing of / is shown but these.
std::vector<std::string> base_argv(const std::filesystem::path& bwrap, std::uint64_t tmp_bytes) {
  std::vector<std::string> argv = {bwrap.string(), "--ro-bind", "/usr", "/usr"};
  std::error_code ec;
  // Merged /usr: /bin, /lib... are links into /usr; elsewhere folders of their own.
  for (const char* d : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    if (std::filesystem::is_symlink(d, ec)) {
      argv.insert(argv.end(), {"--symlink", std::filesystem::read_symlink(d, ec).string(), d});
    } else if (std::filesystem::is_directory(d, ec)) {
      argv.insert(argv.end(), {"--ro-bind", d, d});
    }
  }
  argv.insert(argv.end(), {"--ro-bind", "/etc", "/etc"});
  // The secrets of /etc: files covered by /dev/null, folders by an empty
  // read-only tmpfs.
  for (const char* f : {"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/security/opasswd",
                        "/etc/master.passwd"}) {
    if (std::filesystem::is_regular_file(f, ec)) argv.insert(argv.end(), {"--ro-bind", "/dev/null", f});
  }
  for (const char* d : {"/etc/sudoers.d", "/etc/ssh", "/etc/ssl/private", "/etc/polkit-1", "/etc/credstore"}) {
    if (std::filesystem::is_directory(d, ec) && !std::filesystem::is_symlink(d, ec)) {
      argv.insert(argv.end(), {"--tmpfs", d, "--remount-ro", d});
    }
  }
  argv.insert(argv.end(), {"--dev", "/dev"});
  const bool gpu = has_gpu_nodes();
  for (const auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    if (e.path().filename().string().rfind("nvidia", 0) == 0) {
      argv.insert(argv.end(), {"--dev-bind", e.path().string(), e.path().string()});
    }
  }
  // The CUDA driver reads /sys (PCI topology) and /proc/driver/nvidia.
  if (gpu) argv.insert(argv.end(), {"--ro-bind", "/sys", "/sys"});
  argv.insert(argv.end(), {"--proc", "/proc"});
  if (tmp_bytes > 0) argv.insert(argv.end(), {"--size", std::to_string(tmp_bytes)});
  argv.insert(argv.end(), {"--tmpfs", "/tmp"});
  return argv;
}

// The system folders base_argv shows read-only: a readable folder inside
// one is shown already (and its secrets stay covered).
const std::vector<std::filesystem::path>& system_folders() {
  static const std::vector<std::filesystem::path> folders = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"};
  return folders;
}

void add_namespaces(std::vector<std::string>& argv, SandboxRole role) {
  // No --new-session: it would call setsid and take the command out of the
  // process group that densefeed signals at its timeout.
  if (role == SandboxRole::rank) {
    // The group's network namespace (its loopback, abstract sockets) and
    // IPC namespace stay shared: bwrap cannot join a namespace another
    // sandbox made, so the ranks reach each other through their common parent's.
    argv.insert(argv.end(), {"--unshare-pid", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--cap-drop", "ALL"});
    return;
  }
  argv.insert(argv.end(), {"--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                           "--die-with-parent"});
  // As root, bwrap makes no user namespace: the group's holder keeps the
  // capabilities the ranks' bwrap needs (it runs densefeed's code only).
  if (role == SandboxRole::group && ::geteuid() == 0) return;
  argv.insert(argv.end(), {"--cap-drop", "ALL"});
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
  auto argv = base_argv(bwrap, 1 << 20);
  argv.insert(argv.end(), {"--chdir", "/"});
  add_namespaces(argv, SandboxRole::alone);
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

bool shown_by_system(const std::filesystem::path& p) {
  const auto norm = std::filesystem::absolute(p).lexically_normal();
  const auto inside = [](const std::filesystem::path& a_in, const std::filesystem::path& dir) {
    const auto a = a_in.string(), d = dir.string();
    return a == d || (a.size() > d.size() && a.compare(0, d.size(), d) == 0 && a[d.size()] == '/');
  };
  std::error_code ec;
  const auto real = std::filesystem::weakly_canonical(norm, ec);
  for (const auto& s : system_folders()) {
    if (inside(norm, s) && (ec || inside(real, "/usr") || inside(real, s))) return true;
  }
  return false;
}

std::vector<std::string> sandbox_argv(const SandboxPolicy& policy) {
  auto argv = base_argv(bwrap_path(), policy.tmp_bytes);
  std::error_code ec;
  const auto norm = [](const std::filesystem::path& p) { return std::filesystem::absolute(p).lexically_normal(); };
  const auto inside = [&](const std::filesystem::path& p, const std::filesystem::path& dir) {
    const auto a = norm(p).string(), d = norm(dir).string();
    return a == d || (a.size() > d.size() && a.compare(0, d.size(), d) == 0 && a[d.size()] == '/');
  };
  const auto in_hidden = [&](const std::filesystem::path& p) {
    for (const auto& h : policy.hidden) {
      if (inside(p, h) && norm(p) != norm(h)) return true;
    }
    return false;
  };
  // Shallow folders first, so that a deeper bind is not covered by a wider one.
  std::vector<std::filesystem::path> readable;
  for (const auto& p : policy.readable) {
    if (!shown_by_system(p)) readable.push_back(p);
  }
  std::sort(readable.begin(), readable.end(), [&](const auto& a, const auto& b) { return norm(a).string().size() < norm(b).string().size(); });
  // A folder reached through a symbolic link (a project's build folder
  // linked elsewhere, say) is shown at its real place, where the link in
  // whatever holds it points, and the link's own place gets the link when
  // nothing shown holds it: bwrap cannot mount on a link whose target is
  // not in the sandbox. A real place inside what is hidden (the workspace)
  // is never shown through a link.
  const auto bind_ro = [&](const std::filesystem::path& p) {
    if (!std::filesystem::exists(p, ec)) return;
    const auto real = std::filesystem::canonical(p, ec);
    if (ec || real == norm(p)) {
      argv.insert(argv.end(), {"--ro-bind", norm(p).string(), norm(p).string()});
      return;
    }
    for (const auto& h : policy.hidden) {
      // The hidden folder by its own real place too: a workspace under a
      // linked folder is reached by the same real path.
      std::error_code hec;
      const auto real_h = std::filesystem::weakly_canonical(h, hec);
      if (inside(real, h) || (!hec && inside(real, real_h))) return;
    }
    argv.insert(argv.end(), {"--ro-bind", real.string(), real.string()});
    bool held = false;
    for (const auto& q : readable) held = held || (norm(q) != norm(p) && inside(p, q));
    if (!held) argv.insert(argv.end(), {"--symlink", real.string(), norm(p).string()});
  };
  // 1. what is shown; 2. what of it is hidden again (the workspace: runs,
  // builds, exports, the ledger), only where something shown holds it;
  // 3. what is shown again from inside the hidden (its own run folder, an
  // arm's build); 4. what it writes.
  for (const auto& p : readable) {
    if (!in_hidden(p)) bind_ro(p);
  }
  for (const auto& h : policy.hidden) {
    bool shown = false;
    for (const auto& p : readable) shown = shown || inside(h, p);
    if (!shown) continue;
    if (std::filesystem::is_directory(h, ec)) {
      // Writable but private and empty; read-only would refuse the mount
      // points of what is shown again inside it.
      argv.insert(argv.end(), {"--tmpfs", norm(h).string()});
    } else if (std::filesystem::exists(h, ec)) {
      argv.insert(argv.end(), {"--ro-bind", "/dev/null", norm(h).string()});
    }
  }
  for (const auto& p : readable) {
    if (in_hidden(p)) bind_ro(p);
  }
  for (const auto& p : policy.writable) {
    if (std::filesystem::exists(p, ec)) argv.insert(argv.end(), {"--bind", norm(p).string(), norm(p).string()});
  }
  // A rank shares its group's /dev/shm (the group sandbox's own, empty at
  // its start), as ranks of one host expect.
  if (policy.role == SandboxRole::rank) argv.insert(argv.end(), {"--bind", "/dev/shm", "/dev/shm"});
  if (!policy.cwd.empty()) argv.insert(argv.end(), {"--chdir", policy.cwd.string()});
  add_namespaces(argv, policy.role);
  argv.push_back("--");
  return argv;
}

std::vector<std::filesystem::path> sandbox_mounted_paths(const std::vector<std::string>& argv) {
  std::vector<std::filesystem::path> out;
  const auto add = [&](const std::string& p) {
    if (p != "/dev/null") out.push_back(std::filesystem::path(p).lexically_normal());
  };
  for (std::size_t k = 0; k < argv.size() && argv[k] != "--"; ++k) {
    if ((argv[k] == "--bind" || argv[k] == "--ro-bind") && k + 2 < argv.size()) {
      add(argv[k + 1]);
      add(argv[k + 2]);
      k += 2;
    } else if (argv[k] == "--tmpfs" && k + 1 < argv.size()) {
      add(argv[k + 1]);
      k += 1;
    }
  }
  return out;
}

}  // namespace densefeed
