// Untrusted commands (the candidate's and the base's harnesses, trace and
// acceptance commands, the build commands of a revision) under bubblewrap
// (`bwrap`, Debian package bubblewrap), started by untrusted_launch.h. What a
// sandboxed command sees is a small world, not the machine:
//   - read-only: /usr, /bin, /sbin, /lib*, and /etc without its secrets
//     (shadow, gshadow, sudoers, ssh host keys, ssl private keys: covered);
//     its `readable` folders (the arm's tree and build, the interpreter's
//     prefix, the project's python.path, its own run folder);
//   - written: only its `writable` folders (DENSEFEED_OUT; a revision
//     build's own folder);
//   - hidden again behind an empty tmpfs where a readable folder holds them
//     (`hidden`: the workspace's runs, builds, exports, the ledger): a
//     candidate can never read a reference's outputs or another run's;
//   - its own /tmp: an empty tmpfs of `tmp_bytes`, never the host's /tmp;
//     not /root, not /home, not /run (so no host unix socket path exists);
//   - no network (its own network namespace: only a loopback of its own, and
//     abstract unix sockets of its own);
//   - its own PID namespace: it sees and can signal no process outside, and
//     when it ends (or densefeed does: --die-with-parent) every process it
//     started ends too, even one that called setsid;
//   - no capabilities (--cap-drop ALL: densefeed running as root would
//     otherwise hand them on, and root could remount / read-write);
//   - the GPUs' device nodes (/dev/nvidia*) and, with them, /sys read-only.
// A multi-rank command (rank_group.h) is two levels of it: the group's
// sandbox (its network namespace: one loopback for the ranks' rendezvous)
// holds only `densefeed rank-group`, which starts every rank in a sandbox
// of its own inside it (its own PID namespace and /tmp, only its own rank-K
// output folder writable; the group's loopback and /dev/shm shared).
// The reference runs in it too, from the trusted ref's export
// (untrusted_launch.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace densefeed {

// Where a sandbox stands among the others (see above).
enum class SandboxRole {
  alone,  // one command: every namespace of its own
  // A rank group's outer sandbox: it holds densefeed's own rank-group only,
  // so when densefeed runs as root it keeps its capabilities (bwrap needs
  // them to make the ranks' sandboxes; as another user bwrap nests through
  // a user namespace of its own and they are dropped as for any command).
  group,
  // One rank inside a group's sandbox: its own PID namespace, mounts and
  // /tmp; the group's network namespace and /dev/shm (NCCL's shared-memory
  // transport) shared with its sibling ranks; no capabilities.
  rank,
};

struct SandboxPolicy {
  std::vector<std::filesystem::path> writable;  // bound read-write
  // Bound read-only again after the hidden folders and /tmp are covered:
  // the harness's own folder, its run folder (its working directory).
  std::vector<std::filesystem::path> readable;
  std::vector<std::filesystem::path> hidden;  // folders covered by an empty tmpfs, files by /dev/null
  std::filesystem::path cwd;                  // must be readable or writable
  std::uint64_t tmp_bytes = 0;                // size of the private /tmp (0: bwrap's default, half the RAM)
  SandboxRole role = SandboxRole::alone;
};

enum class SandboxMode { on, off, unavailable };

struct SandboxStatus {
  SandboxMode mode = SandboxMode::off;
  std::string reason;  // off: who turned it off; unavailable: what bwrap said, or that it is missing

  bool on() const { return mode == SandboxMode::on; }
  // "on", "off: --no-sandbox", "unavailable: <reason>": what the report and
  // the ledger record.
  std::string text() const;
};

// Whether candidate commands will run sandboxed: off when not `requested`;
// otherwise bwrap is probed once per densefeed process (it runs `true` with
// the same namespaces as a real command) and is on, or unavailable with the
// reason (bwrap not installed; user namespaces refused in this container).
SandboxStatus sandbox_status(bool requested);

// The policy of a harness process whose run folder (working directory) is
// `run_dir`: it writes only run_dir/out (its DENSEFEED_OUT); run_dir, the
// folder of `exe` (the resolved harness) and `readable` are shown
// read-only; `private_dir` (the ledger's runs folder) is hidden.
SandboxPolicy harness_policy(const std::filesystem::path& run_dir, const std::filesystem::path& exe,
                             const std::filesystem::path& private_dir, std::vector<std::filesystem::path> readable);

// Whether `p` is inside the system folders every sandbox shows read-only
// (/usr, /bin, /sbin, /lib*, /etc) by its own path and its real one.
bool shown_by_system(const std::filesystem::path& p);

// The argv prefix {bwrap, options..., "--"} that runs a command under
// `policy`. Paths that do not exist are skipped, and so are readable
// folders the system part already shows (/usr, /bin, /sbin, /lib*, /etc:
// a harness at /bin/sh has /bin as its folder, which is a link to usr/bin
// on a merged-/usr system and cannot be bound again). Call only when
// sandbox_status(true).on().
std::vector<std::string> sandbox_argv(const SandboxPolicy& policy);

// The host paths an argv from sandbox_argv mounts or makes a mount point of:
// the sources and destinations of --bind and --ro-bind (but /dev/null) and
// the destinations of --tmpfs. bwrap sets them up after the argv was made;
// one gone by then (another ledger's folder in a shown tree, removed by its
// own run) stops it before the command starts ("bwrap: Can't mkdir parents
// for ...", exit 1), a failure that is densefeed's and never the command's
// (untrusted_launch.h). Absolute, lexically normal, in argv order.
std::vector<std::filesystem::path> sandbox_mounted_paths(const std::vector<std::string>& argv);

}  // namespace densefeed
