// The ranks of one arm of a multi-rank case (gate `ranks`, issue 20), run
// as one group: started together, one timeout, and when any rank ends
// other than by exiting 0 (a crash, an exit code, its timeout), every other
// rank of the group is ended at once (SIGTERM, then SIGKILL after the
// grace), so a rank left waiting on a dead peer never runs to the timeout.
//
// Where it runs: launch_untrusted (untrusted_launch.h) runs the whole group
// as ONE command, `densefeed rank-group SPEC.json`, inside the group's
// sandbox (sandbox.h SandboxRole::group): its network namespace is the
// ranks' (bwrap --unshare-net gives each sandbox a loopback of its own, and
// bwrap cannot join a namespace another sandbox made), so
// MASTER_ADDR=127.0.0.1:MASTER_PORT reaches rank 0 as torch.distributed and
// NCCL's bootstrap expect, while nothing outside the arm (the reference,
// another case, the host) is reachable. Inside it every rank runs under its
// own `launcher` (SandboxRole::rank, made by launch_untrusted): its own PID
// namespace (no rank sees, signals or ptraces a sibling or the group's
// launcher), its own /tmp, and only its own output folder (rank-K/ with
// rank_outputs: per_rank) writable. The group shares its cgroup and limits
// (scaled by the rank count), and nothing of it outlives the sandbox. This
// file is the inside half of the one launcher, not a second one: what it
// starts is already contained. Without the sandbox (--no-sandbox) there is
// no launcher and no such guarantee: every rank can write every folder.
//
// Its report (one JSON line on stdout: each rank's ProcessResult) is read
// back by launch_untrusted. The ranks could write that stream too, so it
// only ever names which rank failed: whether the group passed is the
// sandboxed process's own exit status (0 only when every rank exited 0).
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "process_runner.h"

namespace densefeed {

// One rank's command. env is added to the group's own environment (the
// launcher's allowlisted one) and overrides it.
struct RankCommand {
  std::vector<std::string> argv;
  std::vector<std::filesystem::path> exe_dirs;
  std::map<std::string, std::string> env;  // DENSEFEED_OUT, CUDA_VISIBLE_DEVICES of its own...
  std::filesystem::path cwd;
  std::filesystem::path stdout_path;  // ranks/rank-K.stdout.log of the arm's run folder
  std::filesystem::path stderr_path;
  // The argv prefix the rank runs under (sandbox.h sandbox_argv of its
  // SandboxRole::rank policy); empty without the sandbox.
  std::vector<std::string> launcher;
};

struct RankGroupSpec {
  std::vector<RankCommand> ranks;  // rank K is ranks[K]
  std::chrono::milliseconds timeout{600000};  // every rank's, from the group's start
};

// How one rank ended. `first` marks the rank whose end took the group
// down (the first to end not ok); the others that did not end by
// themselves were ended with it (process.cancelled).
struct RankOutcome {
  int rank = 0;
  ProcessResult process;
  bool first = false;
};

// The environment densefeed gives rank `rank` of `world` (beside the
// protocol's DENSEFEED_*): DENSEFEED_RANK, DENSEFEED_WORLD_SIZE, RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (torch.distributed's env://),
// MASTER_ADDR=127.0.0.1, MASTER_PORT=`port`, and NVLink multicast off
// (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
// NVSHMEM_DISABLE_NVLS=1: multicast objects need a fabric manager the
// sandbox does not show).
std::map<std::string, std::string> rank_environment(int rank, int world, int port);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0,
// read, closed). Throws InfraError when no socket can be bound.
int free_loopback_port();

// Runs every rank of `spec` at once (process_runner.h, each in its own
// process group, one thread each) and returns when all have ended, in rank
// order. The first rank to end not ok ends the others (cancelled). Every
// rank gets rank_environment() with one free_loopback_port() for the group,
// and, when its env sets no CUDA_VISIBLE_DEVICES and the inherited one
// lists at least one device per rank (a Slurm job's --gres=gpu:N), the
// K-th of those devices. One group at a time per process (SIGTERM ends the
// running one). Throws InfraError for its own failures only.
std::vector<RankOutcome> run_rank_group(const RankGroupSpec& spec);

// `densefeed rank-group SPEC`: reads SPEC (rank_group_to_json), runs it,
// prints the outcomes as one JSON line on stdout. Returns the exit status:
// 0 when every rank exited 0, else 1.
int rank_group_main(const std::filesystem::path& spec_file);

nlohmann::json rank_group_to_json(const RankGroupSpec& spec);
RankGroupSpec rank_group_from_json(const nlohmann::json& j);
nlohmann::json rank_outcome_to_json(const RankOutcome& r);
RankOutcome rank_outcome_from_json(const nlohmann::json& j);

// The outcomes in a rank-group's stdout (its last line that parses);
// empty when there is none (the group itself was killed, or a rank wrote
// over it).
std::vector<RankOutcome> read_rank_outcomes(const std::filesystem::path& stdout_path);

// The rank that took the group down: the one marked first, else the first
// that did not end ok; nullopt when every rank exited 0.
std::optional<RankOutcome> failed_rank(const std::vector<RankOutcome>& ranks);

// "rank 1 of 2 was killed by signal 11 (SIGSEGV); ranks 0, 2, 3 were ended
// with it": to follow "the candidate's ".
std::string describe_ranks(const std::vector<RankOutcome>& ranks);

}  // namespace densefeed
