#include "gate_runner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "gate_reason.h"
#include "harness_command.h"
#include "harness_protocol.h"
#include "arm_context.h"
#include "command_template.h"
#include "error.h"
#include "executor.h"
#include "process_runner.h"
#include "printable.h"
#include "rank_outputs.h"
#include "rank_group.h"
#include "session.h"
#include "sha256.h"
#include "tensor_file.h"
#include "trend_bound.h"
#include "wrong_candidates.h"

namespace densefeed {
namespace {

struct Job {
  std::vector<std::string> command;  // its argv template (the gate's reference or candidate command)
  TemplateValues values;             // what renders it: its case, the arm's params, the seed, its out/
  const ArmContext* arm = nullptr;
  nlohmann::ordered_json case_json;
  std::string label;  // its case's label (progress)
  std::filesystem::path dir;
  bool untrusted = false;  // a candidate command: through launch_untrusted
  std::string limit;       // the limit it exceeded (untrusted_launch.h), '' when none
  std::map<std::string, std::string> out_hashes;  // a reference's outputs as it exited
  std::filesystem::path answered;  // a session's files as it wrote them, moved aside (session.h)
  std::string gpu;         // the CUDA_VISIBLE_DEVICES it ran with ('' = unchanged)
  Placement placement;     // where the executor ran it (placement.h)
  std::string scheduler_state;  // the Slurm job's final state ('' locally)
  double queue_s = 0;           // its wait in the scheduler's queue, seconds
  std::optional<SchedulerAccounting> accounting;  // what the scheduler's accounting recorded of its job
  std::string infrastructure;  // the executor's failure after its retry (executor.h); '' when none
  std::string containment;     // how the launcher contained it where it ran ("bwrap, cgroup (memory, pids)")
  // In a session (protocol: session): why the request failed, as a value and
  // in words ('' when it answered ok), and what the session measured.
  FailureKind session_kind = FailureKind::none;
  std::string session_failure;
  std::optional<SessionCaseRecord> session;
  std::filesystem::path log_dir;  // where its stdout.log/stderr.log are ('' = dir; a session's folder)
  int ranks = 1;                  // processes of a multi-rank case (gate `ranks`; the reference's is 1)
  std::optional<std::uint64_t> seed;  // its own seed (a bench input set's reference; values.seed too), for a session's request; unset: the run's
  std::vector<RankOutcome> rank_outcomes;  // how each rank ended, in rank order (rank_group.h); empty for one process
  ProcessResult result;
};

Executor& stage_executor(const GateRunOptions& options) { return given_or_local(options.executor); }

void fresh_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir / "out", ec);
  if (ec) throw InfraError(fmt::format("{}: cannot create the run folder: {}", dir.string(), ec.message()));
}

// sha256 of every file a reference wrote, by name, taken as it exits.
std::map<std::string, std::string> hash_outputs(const std::filesystem::path& out) {
  std::map<std::string, std::string> hashes;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(out, ec)) {
    // Not following links: a link, even one that loops, is "not a file".
    hashes[e.path().filename().string()] = e.symlink_status(ec).type() == std::filesystem::file_type::regular
                                               ? sha256_file(e.path())
                                               : "not a file";
  }
  return hashes;
}

// The call of `job`'s process (harness_command.h): the protocol's gate mode,
// run from job.dir, writing its out/. The reference is trusted code (the gate
// store's, from the trusted ref's export or build: trusted_arm.h) but runs in
// the sandbox all the same: it imports libraries that may not be, and it
// must reach nothing the candidate wrote. It writes only its out/ and its
// own compile cache, with the default limits (the gate's `limits` are the
// candidate's), and is shown no revision folders.
HarnessCall job_call(const Job& job, const GateSpec& gate, const GateRunOptions& options) {
  HarnessCall call;
  call.mode = ProtocolMode::gate;
  call.arm = job.arm;
  call.command = job.command;
  call.values = job.values;
  call.case_values = job.case_json;
  call.dir = job.dir;
  call.out = job.dir / "out";
  call.timeout = harness_timeout(gate.timeout_s);
  call.limits = job.untrusted ? gate.limits : CommandLimits{};
  if (job.untrusted) call.readable = options.sandbox_readable;
  call.sandbox = options.sandbox;
  return call;
}

// The Launch of one of a job's processes through the one launcher
// (untrusted_launch.h): a case's process, or its arm's session.
Launch job_launch(const HarnessCall& call) {
  Launch launch;
  launch.untrusted = harness_command(call);
  return launch;
}

// What each rank of a multi-rank `job` adds to its command's environment:
// the same case and seed for every rank; its own GPU (`gpus`, one entry per
// rank, '' none) and, with per-rank outputs, its own folder (made here, so
// that a missing one is the rank's doing).
std::vector<std::map<std::string, std::string>> rank_outputs_env(const Job& job, const GateSpec& gate,
                                                                 const std::vector<std::string>& gpus) {
  std::vector<std::map<std::string, std::string>> ranks;
  for (int k = 0; k < job.ranks; ++k) {
    std::map<std::string, std::string> rank;
    const auto out = gate.per_rank_outputs ? job.dir / "out" / fmt::format("rank-{}", k) : job.dir / "out";
    std::error_code ec;
    std::filesystem::create_directories(out, ec);
    if (ec) throw InfraError(fmt::format("{}: cannot create rank {}'s output folder: {}", out.string(), k, ec.message()));
    rank[kOutEnv] = out.string();
    if (static_cast<std::size_t>(k) < gpus.size() && !gpus[static_cast<std::size_t>(k)].empty()) {
      rank["CUDA_VISIBLE_DEVICES"] = gpus[static_cast<std::size_t>(k)];
    }
    ranks.push_back(std::move(rank));
  }
  return ranks;
}

// `job`'s launch and the allocation it asks for. `gpus`: what the job
// holds, one entry per rank ('' entries: none); a single process gets
// gpus[0]. Its DENSEFEED_SEED is job.values.seed.
BatchLaunch job_batch_launch(Job& job, const GateSpec& gate, const GateRunOptions& options, const std::vector<std::string>& gpus) {
  AllocationRequest request;
  request.name = "gate-" + job.dir.filename().string();
  // Each rank its own GPUs: a scheduler gives the job all of them at once.
  request.gpus = gate.gpus * job.ranks;
  request.time_limit = std::chrono::seconds(static_cast<long long>(std::ceil(gate.timeout_s)));
  request.stage = "gate";
  request.resources = gate.resources.for_stage("gate");
  HarnessCall call = job_call(job, gate, options);
  if (job.ranks > 1) {
    call.rank_env = rank_outputs_env(job, gate, gpus);
  } else {
    if (!gpus.empty()) call.gpu = gpus[0];
    // A one-rank case of a gate with ranks is rank 0 of 1, with the same
    // variables (a torch env:// harness reads them on its unpartitioned
    // point too); its outputs are the case's out/ as for one process.
    if (job.untrusted && gate.ranks != "1") call.extra_env = rank_environment(0, 1, free_loopback_port());
  }
  return BatchLaunch{job_launch(call), request};
}

// What `job`'s launch came to, into the job.
void absorb(Job& job, const LaunchResult& r, const std::vector<std::string>& gpus) {
  job.result = r.result.process;
  job.rank_outcomes = r.result.ranks;
  job.limit = r.result.limit;
  job.gpu = job.ranks > 1 && !gpus.empty() ? fmt::format("{}", fmt::join(gpus, ";")) : r.gpu;
  job.placement = r.placement;
  job.scheduler_state = r.scheduler_state;
  job.queue_s = r.queue_s;
  job.accounting = r.accounting;
  job.infrastructure = r.infrastructure;
  job.containment = r.result.containment;
  // A reference's outputs are hashed the moment its result is in: whatever
  // writes them later (a candidate run without the sandbox) is found before
  // they are compared.
  if (!job.untrusted) job.out_hashes = hash_outputs(job.dir / "out");
}

void run_job(Job& job, const GateSpec& gate, const GateRunOptions& options, const std::vector<std::string>& gpus) {
  const BatchLaunch b = job_batch_launch(job, gate, options, gpus);
  absorb(job, run_launch(stage_executor(options), b.launch, b.request), gpus);
}

// Under a scheduler (it places and assigns GPUs): every job at once
// through Executor::run_batch, the references as one job array and the
// candidates as another (slurm_executor.h). `tell` is progress.
void run_batched(std::vector<Job*>& jobs, int n, const GateSpec& gate, const GateRunOptions& options,
                 const std::function<void(const Job&)>& tell) {
  std::vector<BatchLaunch> batch;
  batch.reserve(jobs.size());
  for (Job* j : jobs) {
    batch.push_back(job_batch_launch(*j, gate, options, {}));
    batch.back().request.name = j->untrusted ? "gate-candidates" : "gate-references";
  }
  const auto results = stage_executor(options).run_batch(batch, n, [&](std::size_t i) { tell(*jobs[i]); });
  for (std::size_t i = 0; i < jobs.size(); ++i) absorb(*jobs[i], results[i], {});
}

// One job thread's sessions: a reference's and a candidate's, each started
// on first need and again after one ended.
struct SessionSlot {
  std::unique_ptr<HarnessSession> reference, candidate;
  int started_reference = 0, started_candidate = 0;
  // Both sessions wind down at once: each one's destructor then waits for
  // an exit already under way.
  ~SessionSlot() {
    for (auto* s : {reference.get(), candidate.get()}) {
      if (s) s->close_input();
    }
  }
};

// Starts the session of `job`'s arm on this thread unless one is running
// (after one ended, a new one). A session's command names no case, so any
// job of the arm starts the same one.
void ensure_session(const Job& job, SessionSlot& slot, int thread, const GateSpec& gate, const GateRunOptions& options,
                    const std::string& gpu) {
  auto& session = job.untrusted ? slot.candidate : slot.reference;
  int& started = job.untrusted ? slot.started_candidate : slot.started_reference;
  const char* arm = job.untrusted ? "candidate" : "reference";
  if (!session || session->ended()) {
    session.reset();
    const auto dir = options.work_dir / fmt::format("session-{}-{}-{}", arm, thread, started);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    std::filesystem::create_directories(dir, ec);
    // A session is told its mode; each request carries its case, seed and
    // out, and has the case's timeout (session.h).
    HarnessCall call = session_call(job_call(job, gate, options), dir);
    call.gpu = gpu;
    Launch launch = job_launch(call);
    session = std::make_unique<HarnessSession>(std::move(launch), dir / "exchange", fmt::format("the {}'s session", arm),
                                               stage_executor(options));
    ++started;
  }
}

// Runs `job` as one request to its arm's session on this thread (session.h).
void run_job_in_session(Job& job, SessionSlot& slot, int thread, const GateSpec& gate, std::uint64_t seed,
                        const GateRunOptions& options, const std::string& gpu) {
  ensure_session(job, slot, thread, gate, options, gpu);
  auto& session = job.untrusted ? slot.candidate : slot.reference;
  const int started = job.untrusted ? slot.started_candidate : slot.started_reference;
  const char* arm = job.untrusted ? "candidate" : "reference";
  SessionRequest request;
  request.mode = "gate";
  request.case_values = job.case_json;
  request.seed = seed;
  const auto timeout = std::chrono::milliseconds(static_cast<long long>(gate.timeout_s * 1000));
  const SessionAnswer a = session->request(request, job.dir / "out", timeout);
  job.gpu = gpu;
  job.placement = local_placement();
  ProcessResult& p = job.result;
  p = ProcessResult{};
  p.started = true;
  p.wall_s = a.wall_s;
  p.exit_code = 0;
  if (!a.ok) {
    job.session_kind = a.kind;
    job.session_failure = a.failure;
    if (a.kind == FailureKind::timeout) p.timed_out = true, p.timeout_s = gate.timeout_s;
    else if (a.signal) p.signal = *a.signal, p.exit_code = -1;
    else p.exit_code = a.exit_code.value_or(1);
    if (a.kind == FailureKind::infrastructure) job.infrastructure = a.failure;
  }
  job.session = SessionCaseRecord{started, session->requests() - 1, a.rss_bytes, a.wall_s, thread};
  job.log_dir = options.work_dir / fmt::format("session-{}-{}-{}", arm, thread, started - 1);
  // Both arms' outputs as they were at the answer (what is compared is
  // densefeed's copy of them); the originals, which a file the session kept
  // open still reaches, are hashed again before the comparison.
  job.out_hashes = a.out_hashes;
  job.answered = a.answered;
  if (a.ended) session.reset();
}

// Slots (GPUs of --gpus, or CPU job slots) that jobs take whole sets of: a
// job of N ranks waits until N are free at once and holds them until it
// ends, so no slot ever serves two processes at a time.
class SlotPool {
 public:
  explicit SlotPool(std::size_t n) : free_(n, true) {}
  std::vector<std::size_t> take(std::size_t n) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return static_cast<std::size_t>(std::count(free_.begin(), free_.end(), true)) >= n; });
    std::vector<std::size_t> taken;
    for (std::size_t i = 0; i < free_.size() && taken.size() < n; ++i) {
      if (free_[i]) free_[i] = false, taken.push_back(i);
    }
    return taken;
  }
  void give(const std::vector<std::size_t>& slots) {
    {
      std::lock_guard lock(mutex_);
      for (auto i : slots) free_[i] = true;
    }
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<bool> free_;
};

// Runs `jobs` on `n` threads (one per GPU when there are GPUs); each job is
// independent. A multi-rank job holds one GPU per rank (gate.gpus each).
// Throws InputError before anything starts when a job needs more GPUs than
// the run holds: it could never start.
void run_all(std::vector<Job*>& jobs, int n, const GateSpec& gate, std::uint64_t seed, const GateRunOptions& options) {
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> threads;
  std::exception_ptr failure;
  std::mutex failure_mutex;
  // Locally one thread per GPU (each job sees only its thread's GPU) or `n`;
  // under a scheduler as many as there are jobs: it places them.
  Executor& ex = stage_executor(options);
  const bool slots = ex.assigns_gpus() && !options.gpus.empty();
  const int threads_wanted = slots ? static_cast<int>(options.gpus.size()) : ex.concurrency(std::max(1, n), jobs.size());
  // Sessions run here, on this machine; under a scheduler each case is a
  // job of its own, and a session harness serves its one case
  // (densefeed_harness.serve handles both).
  const bool sessions = gate.sessions && ex.name() == "local";
  // What a job takes of the pool: a GPU slot per rank (gate.gpus each), or
  // on a CPU a job slot per rank, at most all of them.
  const std::size_t per_rank = static_cast<std::size_t>(std::max(1, gate.gpus));
  const auto needs = [&](const Job& j) -> std::size_t {
    if (j.ranks <= 1) return 1;
    const std::size_t want = static_cast<std::size_t>(j.ranks) * per_rank;
    return slots ? want : std::min(want, static_cast<std::size_t>(threads_wanted));
  };
  if (slots) {
    std::vector<Case> multi;
    for (const Job* j : jobs) {
      if (j->ranks > 1) multi.push_back(Case{j->case_json, ""});
    }
    require_gpus(gate, multi, options.gpus);
  }
  // Progress: told as each process ends, at the pace so far.
  std::mutex progress_mutex;
  RunProgress told{0, "gate", "process", 0, 0, 0, 0, "", "", "", 0, -1};
  for (const Job* j : jobs) ++(j->untrusted ? told.total : told.references);
  const auto stage_start = std::chrono::steady_clock::now();
  const auto tell = [&](const Job& job) {
    if (!options.progress) return;
    const std::lock_guard lock(progress_mutex);
    ++(job.untrusted ? told.done : told.references_done);
    told.case_label = job.label;
    told.arm = job.untrusted ? "candidate" : "reference";
    told.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - stage_start).count();
    const std::size_t ended = told.done + told.references_done, all = told.total + told.references;
    told.eta_s = ended > 0 && ended < all ? told.elapsed_s / static_cast<double>(ended) * static_cast<double>(all - ended) : -1;
    options.progress(told);
  };
  if (!ex.assigns_gpus() && !sessions) {
    run_batched(jobs, n, gate, options, tell);
    return;
  }
  SlotPool pool(static_cast<std::size_t>(threads_wanted));
  for (int t = 0; t < threads_wanted; ++t) {
    const std::string gpu = slots ? options.gpus[static_cast<std::size_t>(t)] : "";
    threads.emplace_back([&, gpu, t] {
      SessionSlot slot;
      // Both arms' sessions start at once, so the candidate's start (an
      // interpreter, torch, a CUDA context: seconds) overlaps the
      // reference's start and requests instead of following them. Only
      // when this thread has a job of each arm ahead of it.
      if (sessions && static_cast<std::size_t>(t) < jobs.size()) {
        try {
          const Job* first[2] = {nullptr, nullptr};
          for (const Job* j : jobs) {
            if (!first[j->untrusted]) first[j->untrusted] = j;
          }
          for (const Job* j : first) {
            if (j) ensure_session(*j, slot, t, gate, options, gpu);
          }
        } catch (...) {
          std::lock_guard lock(failure_mutex);
          failure = std::current_exception();
        }
      }
      for (std::size_t i = next++; i < jobs.size(); i = next++) {
        try {
          if (sessions) {
            run_job_in_session(*jobs[i], slot, t, gate, jobs[i]->seed.value_or(seed), options, gpu);
            tell(*jobs[i]);
            continue;
          }
          const auto held = pool.take(needs(*jobs[i]));
          std::vector<std::string> gpus;
          if (slots) {
            for (std::size_t r = 0; r < held.size(); r += per_rank) {
              std::vector<std::string> mine;
              for (std::size_t g = r; g < r + per_rank && g < held.size(); ++g) mine.push_back(options.gpus[held[g]]);
              gpus.push_back(fmt::format("{}", fmt::join(mine, ",")));
            }
          }
          try {
            run_job(*jobs[i], gate, options, gpus);
          } catch (...) {
            pool.give(held);
            throw;
          }
          pool.give(held);
          tell(*jobs[i]);
        } catch (...) {
          std::lock_guard lock(failure_mutex);
          failure = std::current_exception();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

// "the candidate was killed by signal 11 (SIGSEGV); last stderr line: ...".
// The reason stays one line (the ledger lists it per case); the last lines
// themselves go with the case (log_tail) into the report.
// `ended`: who ended how ("the candidate was killed by ..."; for a
// multi-rank case, which rank and what became of the others).
std::string process_failure(const std::string& ended, const Job& job, const LogTail& tail) {
  std::string reason = ended;
  if (!job.limit.empty()) reason += "; it exceeded " + job.limit;
  // Under a scheduler, the job and how the scheduler saw it end.
  if (!job.scheduler_state.empty() && job.result.ended_by.empty()) reason += fmt::format(" ({} ended {})", to_string(job.placement), job.scheduler_state);
  if (!tail.text.empty()) {
    std::string last = tail.text.substr(tail.text.rfind('\n') == std::string::npos ? 0 : tail.text.rfind('\n') + 1);
    if (last.size() > 200) last = last.substr(0, 200) + "...";
    // Harness output is untrusted: control characters (a tab too) and bytes
    // that are not UTF-8 are escaped so that it cannot fake or hide lines
    // where the reason is printed, nor break the JSON it is recorded in.
    last = printable(last, false);
    reason += fmt::format("; last {} line: {}", tail.stream, last);
  }
  return reason;
}

}  // namespace

void require_gpus(const GateSpec& gate, const std::vector<Case>& cases, const std::vector<std::string>& gpus) {
  if (gpus.empty()) return;
  const int per_rank = std::max(1, gate.gpus);
  for (const auto& c : cases) {
    const int ranks = case_ranks(gate, c.values);
    if (ranks <= 1 || static_cast<std::size_t>(ranks * per_rank) <= gpus.size()) continue;
    throw InputError(gate.file.string(), {}, "ranks",
                     fmt::format("case {} needs {} GPUs ({} ranks x {} GPU(s) each) but this run holds {} (GPUs {}): it could never "
                                 "start; give the run (the worker's slot) at least {} GPUs, or run fewer ranks",
                                 c.values.dump(), ranks * per_rank, ranks, per_rank, gpus.size(), fmt::join(gpus, ","),
                                 ranks * per_rank));
  }
}

namespace {

// Without case_keys, a session's command names no case: the case comes with
// the request, so every case asks the reference's session for its own. A
// process reference whose command names no case key either can learn its
// case only from DENSEFEED_CASE (densefeed_harness.serve reads it there): it
// gets the whole case and runs for each, never once for all with {}.
bool reference_gets_whole_case(const GateSpec& gate) {
  const auto names = placeholders(gate.reference_command);
  const bool names_a_case_key =
      std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.rfind("case.", 0) == 0; });
  return !gate.reference_case_keys && (gate.sessions || !names_a_case_key);
}

}  // namespace

nlohmann::ordered_json reference_case(const GateSpec& gate, const Case& c) {
  if (reference_gets_whole_case(gate)) return c.values;
  const auto names = placeholders(gate.reference_command);
  const auto& keyed = gate.reference_case_keys;
  nlohmann::ordered_json ref_case = nlohmann::ordered_json::object();
  for (const auto& [k, v] : c.values.items()) {
    if (names.count("case." + k) || (keyed && std::find(keyed->begin(), keyed->end(), k) != keyed->end())) ref_case[k] = v;
  }
  return ref_case;
}

std::vector<ReferenceRun> run_references(const GateSpec& gate, const Case& c, const std::vector<std::uint64_t>& seeds,
                                         const GateRunOptions& options) {
  std::vector<Job> refs(seeds.size());
  std::vector<Job*> jobs;
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    Job& ref = refs[i];
    ref.dir = options.work_dir / fmt::format("reference-seed-{}", seeds[i]);
    ref.seed = seeds[i];
    ref.command = gate.reference_command;
    ref.values = {c.values, nlohmann::ordered_json::object(), seeds[i], (ref.dir / "out").string()};
    ref.arm = &options.reference;
    ref.case_json = reference_case(gate, c);
    ref.label = c.label;
    fresh_dir(ref.dir);
    jobs.push_back(&ref);
  }
  run_all(jobs, options.jobs, gate, options.seed, options);
  std::vector<ReferenceRun> out;
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    const Job& ref = refs[i];
    ReferenceRun r;
    r.seed = seeds[i];
    r.out = ref.dir / "out";
    r.wall_s = ref.result.wall_s;
    const auto logs = ref.log_dir.empty() ? ref.dir : ref.log_dir;
    if (!ref.infrastructure.empty()) {
      r.failure = Failure{FailureKind::infrastructure, FailureWho::densefeed, {}, {}, "", "", ref.infrastructure};
      r.reason = fmt::format("the reference of input set {} did not run to an end of its own: {}", seeds[i], ref.infrastructure);
    } else if (!ref.result.ok()) {
      r.failure = process_failure_value(FailureWho::reference, ref.result);
      const LogTail tail = log_tail(logs / "stdout.log", logs / "stderr.log");
      r.reason = fmt::format("the reference of input set {} {}{}", seeds[i], ref.result.describe(),
                             tail.text.empty() ? "" : "; " + tail.stream + ": " + tail.text);
    } else if (hash_outputs(r.out) != ref.out_hashes) {
      r.failure = Failure{FailureKind::malformed_output, FailureWho::reference, {}, {}, "", "", "outputs changed after the reference exited"};
      r.reason = fmt::format("the reference's outputs of input set {} changed after it exited (their sha256 was taken then): "
                             "something else wrote into {}", seeds[i], r.out.string());
    }
    out.push_back(std::move(r));
  }
  return out;
}

namespace {

// The jobs of a gate run: one reference per distinct reference command (as
// it runs, {out} unrendered, with the case keys it names), shared by the
// cases that differ only in what it ignores; one candidate per case.
struct GateJobs {
  std::vector<Job> references;
  std::vector<Job> candidates;
  std::vector<std::size_t> case_reference;  // per case: its reference's index
};

GateJobs plan_gate_jobs(const GateSpec& gate, const std::vector<Case>& cases, const nlohmann::ordered_json& candidate_params,
                        const GateRunOptions& options) {
  GateJobs planned;
  std::map<std::vector<std::string>, std::size_t> reference_index;  // argv (with {out} unrendered) -> job
  std::vector<Job>& references = planned.references;
  planned.candidates.resize(cases.size());
  planned.case_reference.resize(cases.size());
  references.reserve(cases.size());

  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const auto& keyed = gate.reference_case_keys;
    const bool whole_case = reference_gets_whole_case(gate);
    const nlohmann::ordered_json ref_case = reference_case(gate, c);
    // Rendered as it runs ({project}, {gate_dir}, python3 included), with the
    // output folder left as a placeholder: cases that differ only in what the
    // reference ignores share one reference process.
    TemplateValues key_values{c.values, nlohmann::ordered_json::object(), options.seed, "{out}"};
    auto key = arm_command(gate.reference_command, key_values, options.reference);
    if (whole_case) key.push_back(c.label);
    if (keyed) key.push_back(ref_case.dump());
    auto [it, inserted] = reference_index.try_emplace(key, references.size());
    if (inserted) {
      Job ref;
      ref.dir = options.work_dir / fmt::format("reference-{:03}", references.size());
      ref.command = gate.reference_command;
      ref.values = {c.values, nlohmann::ordered_json::object(), options.seed, (ref.dir / "out").string()};
      ref.case_json = ref_case;
      ref.label = c.label;
      ref.arm = &options.reference;
      references.push_back(std::move(ref));
    }
    planned.case_reference[i] = it->second;

    Job& cand = planned.candidates[i];
    cand.dir = options.work_dir / fmt::format("candidate-{:03}", i);
    cand.command = gate.candidate_command;
    cand.values = {c.values, candidate_params, options.seed, (cand.dir / "out").string()};
    cand.case_json = c.values;
    cand.label = c.label;
    cand.arm = &options.candidate;
    cand.untrusted = true;
    cand.ranks = case_ranks(gate, c.values);
  }
  return planned;
}

// `job` (`who`: "the reference", "the candidate") ended badly: the case is
// `v`, its failure typed from how the process (or the failed rank, or the
// session's request) ended, with the last lines of its log.
void fail_case(CaseResult& cr, Verdict v, const char* who, const Job& job) {
  const auto logs = job.log_dir.empty() ? job.dir : job.log_dir;
  // A multi-rank case: the failed rank's own logs and words.
  const auto rank = failed_rank(job.rank_outcomes);
  // A session's stdout carries its answers: its stderr is the tail.
  const LogTail tail = rank ? log_tail(rank_log(job.dir, rank->rank, "stdout"), rank_log(job.dir, rank->rank, "stderr"))
                       : job.log_dir.empty() ? log_tail(logs / "stdout.log", logs / "stderr.log")
                                             : LogTail{"stderr", file_tail(logs / "stderr.log")};
  cr.verdict = v;
  const FailureWho who_failed = v == Verdict::error ? FailureWho::reference : FailureWho::candidate;
  cr.failure = process_failure_value(who_failed, job.result);
  if (job.result.ok() && !job.limit.empty()) cr.failure = Failure{FailureKind::limit, who_failed, {}, {}, "", "", job.limit};
  if (job.untrusted && !job.result.started) cr.failure.kind = FailureKind::sandbox;
  if (rank) cr.failure.rank = rank->rank;
  cr.reason = process_failure(rank ? fmt::format("{}'s {}", who, describe_ranks(job.rank_outcomes))
                                   : fmt::format("{} {}", who, job.result.describe()),
                              job, tail);
  if (!job.session_failure.empty()) {
    cr.failure.kind = job.session_kind;
    cr.failure.detail = job.session_failure;
    std::string last = tail.text.substr(tail.text.rfind('\n') == std::string::npos ? 0 : tail.text.rfind('\n') + 1);
    cr.reason = fmt::format("{}'s session {} (during case {}; its request {} of session {}){}", who, job.session_failure,
                            cr.gate_case.label, job.session->request, job.session->session,
                            last.empty() ? "" : "; last stderr line: " + printable(last.substr(0, 200), false));
  }
  cr.log_tail = tail.text;
  cr.log_tail_stream = tail.stream;
}

// The executor's machinery, not `job`, failed it: error, neither red nor green.
void infrastructure_case(CaseResult& cr, const char* who, const Job& job) {
  cr.verdict = Verdict::error;
  cr.failure = Failure{FailureKind::infrastructure, FailureWho::densefeed, {}, {}, "", "", job.infrastructure};
  cr.reason = fmt::format("{} did not run to an end of its own: {} (an infrastructure failure: error, neither red nor green)", who,
                          job.infrastructure);
}

// The case's verdict, in order: either process's machinery or its own
// failure, outputs changed after they were taken (a session's after its
// answer, the reference's after it exited), else each output compared
// (gathered from the ranks when the gate has per-rank outputs).
void judge_case(const GateSpec& gate, const Job& ref, const Job& cand, CaseResult& cr) {
  if (!ref.infrastructure.empty()) {
    infrastructure_case(cr, "the reference", ref);
  } else if (!ref.result.ok()) {
    fail_case(cr, Verdict::error, "the reference", ref);
  } else if (!cand.infrastructure.empty()) {
    infrastructure_case(cr, "the candidate", cand);
  } else if (!cand.result.ok() || !cand.limit.empty()) {
    fail_case(cr, Verdict::red, "the candidate", cand);
  } else if (cand.session && (hash_outputs(cand.dir / "out") != cand.out_hashes ||
                              !changed_after_answer(cand.answered, cand.out_hashes).empty())) {
    cr.verdict = Verdict::red;
    cr.failure = Failure{FailureKind::malformed_output, FailureWho::candidate, {}, {}, "", "", "outputs changed after the answer"};
    cr.reason = fmt::format("the candidate's session changed its outputs of case {} after it answered (their sha256 was taken "
                            "then, as they left its reach): what it answered with is not what it left; no output of this case "
                            "is compared", cr.gate_case.label);
  } else if (const auto changed = hash_outputs(ref.dir / "out"); changed != ref.out_hashes) {
    std::string which;
    for (const auto& [name, sha] : ref.out_hashes) {
      if (auto it = changed.find(name); it == changed.end() || it->second != sha) which = name;
    }
    for (const auto& [name, sha] : changed) {
      if (!ref.out_hashes.count(name)) which = name;
    }
    cr.verdict = Verdict::red;
    cr.reason = fmt::format("the reference's output {} changed after the reference exited (its sha256 was taken then): "
                            "something else wrote into {}; no output of this case is compared",
                            which, (ref.dir / "out").string());
  } else {
    if (cand.ranks > 1 && gate.per_rank_outputs) {
      cr.outputs = compare_rank_outputs(gate.outputs, cr.gate_case.values, ref.dir / "out", cand.dir / "out", cand.ranks,
                                        cand.dir / "gathered");
    } else {
      for (const auto& out : gate.outputs) {
        cr.outputs.push_back(compare_output(out, cr.gate_case.values, ref.dir / "out", cand.dir / "out"));
      }
    }
    for (const auto& o : cr.outputs) {
      if (o.comparison.verdict == Verdict::green) continue;
      if (!cr.failure.failed() || (o.comparison.verdict == Verdict::error && cr.verdict != Verdict::error)) cr.failure = o.failure;
      cr.verdict = worst(cr.verdict, o.comparison.verdict);
      cr.reason += fmt::format("{}{}: {}", cr.reason.empty() ? "" : "; ", o.output, o.comparison.reason);
    }
  }
}

}  // namespace

GateResult run_gate(const GateSpec& gate, const std::vector<Case>& cases,
                    const nlohmann::ordered_json& candidate_params, const GateRunOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  GateResult gate_result;
  // Fail closed: no reference is started when no candidate may be.
  gate_result.sandbox = require_sandbox(options.sandbox);
  GateJobs planned = plan_gate_jobs(gate, cases, candidate_params, options);
  std::vector<Job>& references = planned.references;

  std::vector<Job*> jobs;
  for (auto& r : references) jobs.push_back(&r);
  for (auto& c : planned.candidates) jobs.push_back(&c);
  // Empty every output folder first: a stale file from an earlier run can
  // never be compared.
  for (auto* j : jobs) fresh_dir(j->dir);
  run_all(jobs, options.jobs, gate, options.seed, options);

  std::vector<bool> reference_counted(references.size(), false);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    CaseResult cr;
    cr.gate_case = cases[i];
    const std::size_t r = planned.case_reference[i];
    const Job& ref = references[r];
    const Job& cand = planned.candidates[i];
    if (!reference_counted[r]) {
      cr.reference_wall_s = ref.result.wall_s;
      reference_counted[r] = true;
      gate_result.harness_wall_s += ref.result.wall_s;
    }
    cr.candidate_wall_s = cand.result.wall_s;
    cr.parts = case_parts(gate.structure, cr.gate_case.values,
                          gate.structure.partition && gate.structure.partition->reported ? read_reported_parts(cand.dir / "out")
                                                                                         : std::nullopt);
    cr.reference_out = ref.dir / "out";
    cr.reference_process = ref.result;
    cr.candidate_process = cand.result;
    cr.candidate_gpu = cand.gpu;
    cr.candidate_ranks = cand.ranks;
    cr.candidate_placement = cand.placement;
    cr.reference_placement = ref.placement;
    cr.candidate_containment = cand.containment;
    cr.candidate_queue_s = cand.queue_s;
    cr.candidate_accounting = cand.accounting;
    cr.reference_accounting = ref.accounting;
    cr.reference_session = ref.session;
    cr.candidate_session = cand.session;
    gate_result.harness_wall_s += cand.result.wall_s;
    judge_case(gate, ref, cand, cr);
    if (cr.verdict != Verdict::green && (!gate_result.failure.failed() ||
                                         (cr.verdict == Verdict::error && gate_result.verdict != Verdict::error))) {
      gate_result.failure = cr.failure;
    }
    gate_result.verdict = worst(gate_result.verdict, cr.verdict);
    gate_result.cases.push_back(std::move(cr));
  }
  judge_trend_bounds(gate, gate_result);
  gate_result.reason = gate_reason(gate_result.cases);
  // A candidate that did not run because its tree lacks a file the trusted
  // ref has (a branch made before the harness was added): say so.
  if (std::any_of(gate_result.cases.begin(), gate_result.cases.end(), [](const CaseResult& c) { return candidate_did_not_run(c.failure); })) {
    const auto missing = files_only_on_trusted_ref(gate.candidate_command, options.candidate, options.reference);
    gate_result.missing_in_candidate = missing;
    if (!missing.empty()) {
      // The stage's failure as a value the ledger keeps, so that `next` says so wherever it is read.
      gate_result.failure = Failure{FailureKind::no_start, FailureWho::candidate, {}, {}, "", "missing_in_candidate",
                                    fmt::format("{}", fmt::join(missing, ", "))};
      gate_result.reason += fmt::format("; {} is on the trusted ref but not in the candidate's tree ({}): the revision predates it, "
                                        "so merge the trusted ref ({}) into it (git merge) and submit again",
                                        fmt::join(missing, ", "), options.candidate.label, options.reference.label);
    }
  }
  gate_result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return gate_result;
}

}  // namespace densefeed
