// Harness sessions (issue 17; schemas/session-request.schema.json,
// schemas/session-answer.schema.json): one long-lived harness process per
// arm that densefeed sends one request per case or bench round, so that an
// expensive start (an interpreter, torch, a CUDA context, Triton's compiles)
// is paid once per arm instead of once per case.
//
// The process is started through the executor like any launch (executor.h:
// the sandbox, limits and environment of untrusted_launch.h, for a candidate,
// a base and a reference alike) with DENSEFEED_SESSION=1 and its
// stdin a pipe. A request is one JSON line on its stdin:
//   {"densefeed_session": 1, "id": N, "mode": "gate"|"bench", "case": {...},
//    "seed": "U64", "out": DIR, "warmup": W, "iters": I}
// and its answer one JSON line on its stdout, after the outputs are written:
//   {"id": N, "status": "ok"} or {"id": N, "status": "error", "message": "..."}
// (anything it prints for people goes to stderr). DIR is a fresh empty folder
// made for this request inside the session's one writable folder (the
// exchange folder); once the answer is read densefeed moves it out of the
// session's reach (a rename: the session no longer sees it), replaces each
// file by a copy of its own and keeps the original aside, so a session can
// neither write a past case's outputs by path nor see a future case's
// folder, and what a file it kept open still reaches is never what is
// compared (the original is hashed again: changed_after_answer). Everything
// the gate judges stays as without sessions: the run's seed, outputs read
// from files and compared by densefeed, reference and candidate in separate
// processes.
//
// What ends a request other than an answer: the case's timeout (the session
// is killed), the session exiting (a crash, an exit code), a line that is not
// an answer, an answer for another id. Each is a SessionFailure naming what
// happened; the session is then ended, and the caller starts a new one for
// the next case.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "executor.h"
#include "failure.h"
#include "process_freezer.h"

namespace densefeed {

struct SessionRequest {
  std::string mode = "gate";             // gate | bench
  nlohmann::ordered_json case_values;    // the case
  std::uint64_t seed = 0;
  int warmup = 0, iters = 0;             // bench
};

struct SessionAnswer {
  bool ok = false;            // answered "ok" for this request
  // Why not, to follow "the candidate's session " ("did not answer within
  // 10 s and was killed", "exited with code 1 before answering", "wrote
  // 'hello' on stdout, which is not an answer", "answered for request 3 while
  // request 4 was asked", "reported an error: KeyError 'n'").
  std::string failure;
  FailureKind kind = FailureKind::none;  // timeout | crash | exit_code | malformed_output | no_start | limit | infrastructure
  std::optional<int> signal, exit_code;  // when the session ended by one
  bool ended = false;         // the session is over (killed or exited): start another for the next request
  double wall_s = 0;          // from the request's write to its answer, seconds (densefeed's own clock)
  std::uint64_t rss_bytes = 0;  // resident memory of the session's processes after the answer, bytes (VmRSS summed)
  // Where the request's outputs are now: densefeed's own copies of the files
  // the session wrote (a plain file with one name is copied; a link or a
  // folder stays as it was, for the comparison to refuse), so nothing the
  // session still holds open reaches what is compared.
  std::filesystem::path out;
  std::map<std::string, std::string> out_hashes;  // sha256 of each entry in `out` as it was copied ("not a file" otherwise)
  // The files the session wrote, moved aside when they were copied: what a
  // descriptor it kept open still reaches (changed_after_answer).
  std::filesystem::path answered;
};

// The first file in `answered` (SessionAnswer::answered) whose bytes are
// no longer those `out_hashes` recorded as it was copied: a session that
// kept a file open and wrote it after its answer. "" when none changed
// (what is compared, the copies, never can).
std::string changed_after_answer(const std::filesystem::path& answered, const std::map<std::string, std::string>& out_hashes);

class HarnessSession {
 public:
  // Starts `launch` (its stdin_fd / leader are set here) in an allocation of
  // `executor` (the stage's, which must outlive the session); `exchange` is the folder the launch may write (its
  // request folders are made there) and `who` names it in failures ("the
  // candidate's session"). Throws InfraError when the pipe or folders cannot
  // be made; a command that cannot start shows at the first request.
  HarnessSession(Launch launch, std::filesystem::path exchange, std::string who, Executor& executor);
  // Closes the session's stdin (close_input), waits up to 1 s for it to
  // exit, then kills it: after its last answer nothing it does is read, and
  // an interpreter's teardown (torch, a CUDA context: seconds) is no part of
  // the verdict's time.
  ~HarnessSession();
  // Ends the session's input now (a serving harness exits at end of input),
  // so that several sessions wind down at once before they are destroyed.
  // Idempotent.
  void close_input();
  // Freezes every process of the session, or lets them go on: a benchmark
  // holds one arm's session still while the other arm's round is timed, so
  // that no session loads the machine under the other arm's clock between
  // its own requests. The processes are the leader and everything below it
  // (with the sandbox, its whole PID namespace), held by the cgroup v2
  // freezer where densefeed can make a cgroup (a process forked inside is
  // born frozen; SIGCONT does not wake it), else by the SIGSTOP walk
  // (process_freezer.h; freeze_mechanism() says which). Work a session had
  // already queued on a GPU is not stopped. No-op once it has ended.
  void pause();
  void resume();
  std::string freeze_mechanism() const { return freezer_.mechanism(); }
  HarnessSession(const HarnessSession&) = delete;
  HarnessSession& operator=(const HarnessSession&) = delete;

  // Sends one request and waits for its answer at most `timeout`; the
  // request's outputs end up in `dest` (which must not exist; its parent on
  // the same filesystem as the exchange folder).
  SessionAnswer request(const SessionRequest& request, const std::filesystem::path& dest, std::chrono::milliseconds timeout);

  bool ended() const { return done_.load(); }
  int requests() const { return next_id_; }
  // How the process ended (valid once ended()).
  LaunchResult result() const;

 private:
  SessionAnswer end_request(SessionAnswer a, const char* what);
  std::string read_line(std::chrono::steady_clock::time_point deadline, bool& timed_out);

  Launch launch_;
  Executor& executor_;
  std::filesystem::path exchange_;
  std::string who_;
  int write_fd_ = -1;
  std::atomic<int> leader_{0};
  std::atomic<bool> cancel_{false};
  std::atomic<bool> done_{false};
  std::atomic<bool> input_closed_{false};
  std::atomic<bool> paused_{false};
  ProcessFreezer freezer_{"session"};  // destroyed after the session ended: kills what it left in its cgroup
  mutable std::mutex mutex_;
  LaunchResult result_;
  std::thread thread_;
  std::uint64_t stdout_offset_ = 0;
  std::string pending_;  // stdout bytes read past the last full line
  int next_id_ = 0;
};

// Resident memory of `root` and every process below it (VmRSS from
// /proc/PID/status), bytes; 0 when it is gone.
std::uint64_t tree_rss_bytes(int root);

}  // namespace densefeed
