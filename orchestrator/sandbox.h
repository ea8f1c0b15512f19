// Untrusted commands (the candidate's and the base's harnesses, and the
// build commands of a candidate or base revision) under bubblewrap (`bwrap`,
// Debian package bubblewrap). What a sandboxed command gets:
//   - the whole filesystem read-only, with a private empty /tmp;
//   - written: only its `writable` folders (DENSEFEED_OUT; a revision
//     build's own folder);
//   - hidden behind an empty tmpfs: the ledger's runs folder, where the
//     reference's outputs lie (a candidate could otherwise copy them);
//   - the gates, gates.lock and the ledger: read-only (or hidden when they
//     lie under /tmp or a hidden folder);
//   - no network (its own network namespace: only a loopback of its own);
//   - its own PID namespace: it sees and can signal no process outside, and
//     when it ends (or densefeed does: --die-with-parent) every process it
//     started ends too, even one that called setsid;
//   - no capabilities (--cap-drop ALL: densefeed running as root would
//     otherwise hand them on, and root could remount / read-write);
//   - the GPUs' device nodes (/dev/nvidia*) when the machine has them.
// The reference runs outside it: it is built from the gate's frozen files
// in densefeed's own checkout, as trusted as densefeed itself.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace densefeed {

struct SandboxPolicy {
  std::vector<std::filesystem::path> writable;  // bound read-write
  // Bound read-only again after the hidden folders and /tmp are covered:
  // the harness's own folder, its run folder (its working directory).
  std::vector<std::filesystem::path> readable;
  std::vector<std::filesystem::path> hidden;  // covered by an empty tmpfs
  std::filesystem::path cwd;                  // must be readable or writable
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

// The argv prefix {bwrap, options..., "--"} that runs a command under
// `policy`. Paths that do not exist are skipped. Call only when
// sandbox_status(true).on().
std::vector<std::string> sandbox_argv(const SandboxPolicy& policy);

}  // namespace densefeed
