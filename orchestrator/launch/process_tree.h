// The processes of this machine as /proc shows them, and killing a set of
// them: what a command leaves behind outside its process group (a child that
// called setsid, a daemon whose parent exited) is found here.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace densefeed {

struct ProcessEntry {
  pid_t pid = 0;
  pid_t ppid = 0;
  pid_t pgid = 0;
  char state = '?';  // R, S, D, Z, ... (proc(5))
};

// Every process whose /proc/PID/stat is readable now. Processes that end
// while it reads are left out.
std::vector<ProcessEntry> list_processes();

// The processes below `root` (its children, theirs, ...), whatever process
// group or session they moved to; `root` itself is not included.
std::vector<pid_t> descendants(const std::vector<ProcessEntry>& processes, pid_t root);

// Sends SIGTERM to each of `pids`, waits up to `grace` for them to end, then
// SIGKILLs what is left. Returns how many had to be killed with SIGKILL.
std::size_t terminate_processes(const std::vector<pid_t>& pids, std::chrono::milliseconds grace);

// Makes this process the reaper of its orphaned descendants (Linux
// PR_SET_CHILD_SUBREAPER): a process that escapes its command's group and
// loses its parent is re-parented here rather than to init, so that
// sweep_adopted_orphans can find it. Returns false where the kernel refuses.
bool adopt_orphans();
bool adopting_orphans();

// The value of `name` in the environment `pid` was started with
// (/proc/PID/environ), or nullopt when it has none or cannot be read.
std::optional<std::string> initial_environment(pid_t pid, const std::string& name);

// Which command the processes still running belong to: their process
// groups, and the tokens their environments carry (`token_name`=TOKEN; a
// process that left its group still carries its command's token unless it
// cleared its environment).
struct RunningCommands {
  std::set<pid_t> groups;
  std::string token_name;
  std::set<std::string> tokens;
};

// Kills (SIGTERM, then SIGKILL after `grace`) and reaps this process's
// children that belong to no running command, with everything below them.
// Only adopted orphans can be such children when every command is started
// as a group leader; an orphan that still belongs to a running command is
// left to that command's own end. Returns the processes killed that had
// left `finished_group` (the group of the command that just ended): its own
// members were already sent SIGKILL with the group and are only reaped here
// (bwrap's PID-namespace init, say, can outlive bwrap's main process by a
// moment).
std::vector<pid_t> sweep_adopted_orphans(const RunningCommands& running, pid_t finished_group,
                                         std::chrono::milliseconds grace);

}  // namespace densefeed
