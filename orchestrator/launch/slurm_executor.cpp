#include "slurm_executor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "error.h"
#include "launch_json.h"
#include "ledger_key.h"
#include "sha256.h"
#include "slurm_options.h"

namespace densefeed {
namespace {

namespace fs = std::filesystem;
using J = nlohmann::json;

// Job ids this process has running, for the termination hook (a signal
// handler may only read atomics): 0 = free slot.
std::array<std::atomic<long>, 4096> g_live{};
char g_scancel[4096] = {0};  // scancel's path, resolved when the executor is made

void live_add(long id) {
  for (auto& s : g_live) {
    long expected = 0;
    if (s.compare_exchange_strong(expected, id)) return;
  }
}
void live_remove(long id) {
  for (auto& s : g_live) {
    long expected = id;
    if (s.compare_exchange_strong(expected, 0)) return;
  }
}

// From a signal handler: fork + execv scancel with every live job id (no
// allocation: the argv is built in static buffers), then wait for it.
extern "C" void cancel_live_jobs() {
  if (g_scancel[0] == 0) return;
  static char ids[4096][24];
  static char* argv[4096 + 3];
  std::size_t n = 0;
  argv[n++] = g_scancel;
  static char quiet[] = "--quiet";
  argv[n++] = quiet;
  for (auto& s : g_live) {
    long id = s.load();
    if (id <= 0 || n >= 4096) continue;
    char buf[24];
    int len = 0;
    while (id > 0 && len < 23) buf[len++] = static_cast<char>('0' + id % 10), id /= 10;
    char* out = ids[n];
    for (int i = 0; i < len; ++i) out[i] = buf[len - 1 - i];
    out[len] = 0;
    argv[n++] = out;
  }
  if (n == 2) return;
  argv[n] = nullptr;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execv(g_scancel, argv);
    ::_exit(127);
  }
  if (pid > 0) ::waitpid(pid, nullptr, 0);
}

struct Answer {
  bool ok = false;
  std::string out, err, describe;
};

// A scheduler command (sbatch, squeue, scancel): densefeed's own, trusted.
Answer scheduler(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env = {}) {
  static std::atomic<unsigned> counter{0};
  const fs::path base = fs::temp_directory_path() / fmt::format("densefeed-slurm-{}-{}", ::getpid(), counter++);
  ProcessSpec spec;
  spec.argv = argv;
  spec.env = env;
  spec.cwd = fs::temp_directory_path();
  spec.stdout_path = base.string() + ".out";
  spec.stderr_path = base.string() + ".err";
  spec.timeout = std::chrono::seconds(60);
  const ProcessResult p = run_process(spec);
  Answer a;
  a.ok = p.ok();
  a.describe = p.describe();
  const auto slurp = [](const fs::path& f) {
    std::ifstream in(f);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  };
  a.out = slurp(spec.stdout_path);
  a.err = slurp(spec.stderr_path);
  std::error_code ec;
  fs::remove(spec.stdout_path, ec);
  fs::remove(spec.stderr_path, ec);
  while (!a.err.empty() && (a.err.back() == '\n' || a.err.back() == ' ')) a.err.pop_back();
  return a;
}

std::string slurp_tail(const fs::path& f, std::size_t bytes = 400) {
  std::ifstream in(f);
  std::stringstream s;
  s << in.rdbuf();
  std::string t = s.str();
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  if (t.size() > bytes) t = "..." + t.substr(t.size() - bytes);
  for (auto& ch : t) {
    if (ch == '\n') ch = ' ';
  }
  return t;
}

void write_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.close();
    if (!out) throw InfraError(fmt::format("{}: cannot write", tmp.string()));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw InfraError(fmt::format("{}: cannot rename into place: {}", path.string(), ec.message()));
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

class SlurmExecutor;

std::string random_key() {
  std::ifstream in("/dev/urandom", std::ios::binary);
  unsigned char bytes[32];
  in.read(reinterpret_cast<char*>(bytes), sizeof bytes);
  if (!in) throw InfraError("/dev/urandom: cannot read the Slurm jobs' launch key");
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

std::optional<LaunchResult> read_result_file(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  try {
    return launch_result_from_json(J::parse(in));
  } catch (const nlohmann::json::exception& e) {
    throw InfraError(fmt::format("{}: not a launch result: {}", file.string(), e.what()));
  }
}

void write_signed_launch(const fs::path& file, const std::string& key, const std::string& text) {
  // The HMAC first: slurm-serve reads a launch only once its file exists.
  write_atomically(fs::path(file.string() + ".hmac"), hmac_sha256_hex(key, text));
  write_atomically(file, text);
}

// What a job (or array task) that ended without a result file means, from
// its final state: timeout, cancel, or infrastructure (executor.h).
struct Ended {
  std::string job;          // as the user sees it: "41", "40_3", "step-2"
  std::string state;        // its final state ("VANISHED": Slurm forgot it and no accounting has it)
  fs::path dir;             // the job's folder
  fs::path err;             // its stderr file
  long minutes = 1;         // its --time
  double limit_s = 0;       // the launch's own limit
  bool cancelled_by_us = false;
  std::string node;
};
LaunchResult ended_without_result(const Ended& e) {
  LaunchResult r;
  r.placement = Placement{"slurm", e.job, e.node};
  const SlurmOutcome outcome = classify_slurm_state(e.state);
  if (e.state != "VANISHED") r.scheduler_state = e.state;
  ProcessResult& p = r.result.process;
  p.started = true;
  std::error_code ec;
  const std::string tail = slurp_tail(e.err);
  if (outcome == SlurmOutcome::timeout) {
    p.timed_out = true;
    p.timeout_s = static_cast<double>(e.minutes * 60);
    p.ended_by = fmt::format("Slurm job {} ended TIMEOUT: it ran past its Slurm time limit (asked for {} min: the launch's {:g} s "
                             "plus a minute, in whole minutes)", e.job, e.minutes, e.limit_s);
  } else if (outcome == SlurmOutcome::cancelled && (e.cancelled_by_us || cancel_requested())) {
    p.cancelled = true;
    p.ended_by = fmt::format("densefeed scancelled Slurm job {}", e.job);
  } else if (e.state == "VANISHED") {
    // Purged past MinJobAge with no accounting to ask: nobody knows how it
    // ended, so it is not retried blindly.
    r.scheduler_state = "unknown";
    r.infrastructure = fmt::format("Slurm job {} is no longer known to Slurm and left no result; the cluster's accounting has no "
                                   "record of it, so how it ended is unknown (not retried)", e.job);
  } else if (fs::exists(e.dir / "interrupted", ec)) {
    r.infrastructure = fmt::format("Slurm job {} was told its end is near (SIGUSR1: a preemption or its time limit) and stopped "
                                   "after the launches it had finished", e.job);
  } else {
    const char* why = outcome == SlurmOutcome::finished ? " without writing its result" : "";
    r.infrastructure = fmt::format("Slurm job {} ended {}{}{}", e.job, e.state, why, tail.empty() ? "" : " (" + e.err.string() + ": " + tail + ")");
  }
  return r;
}

// How the cluster keeps accounting (slurm_executor.h): "sacct"
// (AccountingStorageType other than none), "jobcomp" (JobCompType
// jobcomp/filetxt: sacct --completion), or "off".
std::string detect_accounting() {
  if (const char* a = std::getenv("DENSEFEED_SLURM_ACCOUNTING"); a && std::string(a) == "off") return "off";
  if (resolve_executable("sacct").empty() || resolve_executable("scontrol").empty()) return "off";
  const Answer a = scheduler({"scontrol", "show", "config"});
  if (!a.ok) return "off";
  std::string storage, jobcomp;
  std::istringstream in(a.out);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    k.erase(k.find_last_not_of(' ') + 1);
    v.erase(0, v.find_first_not_of(' '));
    if (k == "AccountingStorageType") storage = v;
    if (k == "JobCompType") jobcomp = v;
  }
  if (!storage.empty() && storage != "accounting_storage/none") return "sacct";
  if (jobcomp == "jobcomp/filetxt") return "jobcomp";
  return "off";
}

class SlurmExecutor : public Executor {
 public:
  explicit SlurmExecutor(SlurmOptions o) : options_(std::move(o)) {
    const auto scancel = resolve_executable("scancel");
    if (options_.steps) {
      const char* job = std::getenv("SLURM_JOB_ID");
      if (!job || !*job) {
        throw InfraError("--executor slurm-steps runs inside a Slurm allocation (salloc, or sbatch of the worker itself): "
                         "SLURM_JOB_ID is not set here");
      }
      if (resolve_executable("srun").empty()) throw InfraError("--executor slurm-steps: srun must be on PATH (Debian: slurm-client)");
      allocation_ = job;
    } else if (resolve_executable("sbatch").empty() || resolve_executable("squeue").empty() || scancel.empty()) {
      throw InfraError("--executor slurm: sbatch, squeue and scancel must be on PATH (Debian: slurm-client)");
    }
    std::snprintf(g_scancel, sizeof g_scancel, "%s", scancel.c_str());
    add_termination_hook(cancel_live_jobs);
    interval_ = options_.poll_s;
    poller_ = std::thread([this] { poll(); });
  }
  ~SlurmExecutor() override {
    bool batch_jobs = false;
    {
      std::lock_guard lock(mutex_);
      for (const auto& id : watched_) batch_jobs = batch_jobs || id.rfind("step-", 0) != 0;
    }
    // A released job ends by itself: its state is asked once more before
    // what still runs is ended (no job outlives the executor).
    if (batch_jobs) refresh();
    std::vector<std::string> live;
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      for (const auto& id : watched_) {
        if (classify_slurm_state(states_[id]) == SlurmOutcome::pending) live.push_back(id);
      }
    }
    poll_cv_.notify_all();
    wake_.notify_all();
    poller_.join();
    cancel(live);
    for (auto& t : steps_) t.join();
  }

  std::unique_ptr<Allocation> allocate(const AllocationRequest& request) override;
  std::vector<LaunchResult> run_batch(const std::vector<BatchLaunch>& batch, int requested,
                                      const std::function<void(std::size_t)>& ended) override;
  bool assigns_gpus() const override { return false; }
  int concurrency(int requested, std::size_t jobs) const override {
    // Inside an allocation its steps queue in srun; as many as asked.
    if (options_.steps) return std::max(1, requested);
    return static_cast<int>(std::clamp<std::size_t>(jobs, 1, 512));
  }
  std::string name() const override { return options_.steps ? "slurm-steps" : "slurm"; }

  void set_job_context(const std::string& prefix, const std::filesystem::path& root) override {
    std::lock_guard lock(mutex_);
    prefix_ = prefix;
    root_ = root;
  }
  std::string job_name(const std::string& name) {
    std::lock_guard lock(mutex_);
    return prefix_ + name;
  }
  // A fresh folder for one job's files, under the job root (never inside a
  // folder any launch may write).
  fs::path job_dir(const std::string& name) {
    fs::path dir;
    {
      std::lock_guard lock(mutex_);
      if (root_.empty()) root_ = fs::temp_directory_path() / fmt::format("densefeed-slurm-jobs-{}", ::getpid());
      dir = root_ / fmt::format("{:05}-{}", jobs_made_++, name);
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir, ec);
    if (ec) throw InfraError(fmt::format("{}: cannot create the Slurm job folder: {}", dir.string(), ec.message()));
    return dir;
  }
  // The key launch files are signed with (HMAC-SHA256): slurm-serve runs
  // only what carries it; it reaches the job through sbatch's environment.
  const std::string& key() const { return key_; }
  const SlurmOptions& options() const { return options_; }
  std::string node(const std::string& id) {
    std::lock_guard lock(mutex_);
    return nodes_[id];
  }
  // The numeric job id (squeue %A) of a job or array task: what accounting knows it by.
  std::string raw_id(const std::string& id) {
    std::lock_guard lock(mutex_);
    const auto it = raw_.find(id);
    return it == raw_.end() ? id : it->second;
  }

  // Submits `script` (sbatch, or in steps mode an srun step) and returns
  // its job id ("ID" or "step-N"). `array`: tasks 0..array-1 (sbatch
  // --array, throttled by request.resources.array_throttle). Throws
  // InfraError with sbatch's message when it refuses.
  std::string submit(const AllocationRequest& request, const fs::path& dir, long minutes, std::size_t array);

  // Follows `id` (a job, an array task "ID_T", a step) until unwatched.
  void watch(const std::string& id) {
    std::lock_guard lock(mutex_);
    watched_.insert(id);
    states_[id] = options_.steps ? states_[id] : "";
    unseen_[id] = 0;
    watched_at_[id] = std::chrono::steady_clock::now();
    // New jobs: the interval starts again from its shortest.
    interval_ = options_.poll_s;
    next_poll_ = std::min(next_poll_, std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                                              std::chrono::duration<double>(options_.poll_s)));
    kick_ = true;
    poll_cv_.notify_all();
  }
  void unwatch(const std::string& id) {
    std::lock_guard lock(mutex_);
    watched_.erase(id);
    released_.erase(id);
    states_.erase(id);
    unseen_.erase(id);
  }
  // A job whose allocation is done with it: it ends by itself once its
  // launches are done; followed until then (and ended with the executor).
  void release(const std::string& id) {
    std::lock_guard lock(mutex_);
    released_.insert(id);
  }
  // The job's last known state: '' not seen yet, "VANISHED" when squeue
  // stopped listing it (or never did within a minute of its submission).
  std::string state(const std::string& id) {
    std::lock_guard lock(mutex_);
    return states_[id];
  }
  // A short wait (result files are looked for at this pace; squeue is
  // asked at its own growing interval).
  void nap() {
    std::unique_lock lock(mutex_);
    wake_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stop_; });
  }
  // Asks squeue now and waits for its answer (at most a minute).
  void refresh() {
    std::unique_lock lock(mutex_);
    const auto seen = polls_;
    poll_now_ = true;
    poll_cv_.notify_all();
    wake_.wait_for(lock, std::chrono::seconds(60), [&] { return polls_ != seen || stop_; });
  }
  void cancel(const std::vector<std::string>& ids) {
    std::vector<std::string> jobs;
    {
      std::lock_guard lock(mutex_);
      for (const auto& id : ids) {
        if (id.rfind("step-", 0) == 0) {
          if (auto it = step_cancel_.find(id); it != step_cancel_.end()) *it->second = true;
        } else {
          jobs.push_back(id);
        }
      }
    }
    if (jobs.empty()) return;
    std::vector<std::string> argv = {"scancel", "--quiet"};
    argv.insert(argv.end(), jobs.begin(), jobs.end());
    scheduler(argv);
  }
  // What accounting recorded of the jobs `raw_ids` (numeric), once each has
  // a record: sacct is asked again (0.3 s, doubling, about 10 s in all)
  // while some have none yet (slurmctld writes a record as a job ends).
  // Empty where the cluster keeps no accounting.
  std::map<std::string, SchedulerAccounting> account(const std::vector<std::string>& raw_ids);

 private:
  void poll();
  void start_step(const std::string& id, std::vector<std::string> argv, const fs::path& dir, double limit_s);

  SlurmOptions options_;
  std::string allocation_;  // steps mode: the allocation's SLURM_JOB_ID
  std::mutex mutex_;
  std::condition_variable wake_, poll_cv_;
  std::string prefix_ = "densefeed-adhoc-";
  fs::path root_;
  std::uint64_t jobs_made_ = 0;
  std::string key_ = random_key();
  std::map<std::string, std::string> nodes_, raw_;
  std::set<std::string> watched_, released_;
  std::map<std::string, std::string> states_;
  std::map<std::string, int> unseen_;
  std::map<std::string, std::chrono::steady_clock::time_point> watched_at_;
  std::uint64_t polls_ = 0;
  double interval_ = 1;
  std::chrono::steady_clock::time_point next_poll_ = std::chrono::steady_clock::now();
  bool poll_now_ = false, kick_ = false, stop_ = false;
  std::once_flag accounting_once_;
  std::string accounting_ = "off";
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> step_cancel_;
  std::vector<std::thread> steps_;
  std::uint64_t steps_made_ = 0;
  std::thread poller_;
};

void SlurmExecutor::poll() {
  const std::string uid = std::to_string(::getuid());
  std::unique_lock lock(mutex_);
  while (!stop_) {
    bool any = false;
    for (const auto& id : watched_) any = any || id.rfind("step-", 0) != 0;
    const auto now = std::chrono::steady_clock::now();
    if (any && (now >= next_poll_ || poll_now_)) {
      poll_now_ = false;
      lock.unlock();
      // -r: each task of an array on a line of its own ("40_3").
      const Answer a = scheduler({"squeue", "-h", "-r", "--states=all", "-u", uid, "-o", "%i|%T|%N|%A"});
      lock.lock();
      if (a.ok) {
        std::map<std::string, std::string> listed;
        std::istringstream in(a.out);
        for (std::string line; std::getline(in, line);) {
          std::vector<std::string> f;
          std::stringstream fields(line);
          for (std::string x; std::getline(fields, x, '|');) f.push_back(x);
          if (f.size() < 2) continue;
          listed[f[0]] = f[1];
          if (f.size() > 2 && !f[2].empty()) nodes_[f[0]] = f[2];
          if (f.size() > 3 && !f[3].empty()) raw_[f[0]] = f[3];
        }
        const auto t = std::chrono::steady_clock::now();
        for (auto it = watched_.begin(); it != watched_.end();) {
          const std::string& id = *it;
          if (id.rfind("step-", 0) == 0) {
            ++it;
            continue;
          }
          if (auto l = listed.find(id); l != listed.end()) {
            states_[id] = l->second;
            unseen_[id] = 0;
          } else if (states_[id].empty() ? t - watched_at_[id] > std::chrono::seconds(60) : ++unseen_[id] >= 2) {
            states_[id] = "VANISHED";
          }
          // A released job that has ended is no longer followed.
          if (released_.count(id) && classify_slurm_state(states_[id]) != SlurmOutcome::pending) {
            released_.erase(id);
            states_.erase(id);
            unseen_.erase(id);
            it = watched_.erase(it);
          } else {
            ++it;
          }
        }
      }
      ++polls_;
      // The interval grows (x1.5) from DENSEFEED_SLURM_POLL_S to
      // DENSEFEED_SLURM_POLL_MAX_S while nothing new is submitted.
      next_poll_ = std::chrono::steady_clock::now() +
                   std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(interval_));
      interval_ = std::min(options_.poll_max_s, interval_ * 1.5);
      wake_.notify_all();
    }
    kick_ = false;
    const auto until = any ? next_poll_ : std::chrono::steady_clock::now() + std::chrono::seconds(1);
    poll_cv_.wait_until(lock, until, [&] { return stop_ || poll_now_ || kick_; });
  }
}

std::map<std::string, SchedulerAccounting> SlurmExecutor::account(const std::vector<std::string>& raw_ids) {
  std::call_once(accounting_once_, [&] { accounting_ = options_.steps ? "off" : detect_accounting(); });
  std::map<std::string, SchedulerAccounting> got;
  if (accounting_ == "off" || raw_ids.empty()) return got;
  std::string ids;
  for (const auto& id : raw_ids) ids += (ids.empty() ? "" : ",") + id;
  double wait_s = 0.3;
  for (int tries = 0; tries < 6; ++tries) {
    std::vector<std::string> argv = {"sacct", "-n", "-P"};
    if (accounting_ == "jobcomp") argv.push_back("--completion");
    for (const char* a : {"-j", ids.c_str(), "-o", "JobIDRaw,State,ExitCode,Elapsed,MaxRSS,NodeList"}) argv.push_back(a);
    const Answer a = scheduler(argv);
    // A requeued job has a record per run: the last is how it ended.
    if (a.ok) {
      for (auto& rec : parse_sacct(a.out, accounting_)) got[rec.job] = rec;
    }
    bool all = true;
    for (const auto& id : raw_ids) all = all && got.count(id);
    if (all || !a.ok) break;
    std::this_thread::sleep_for(std::chrono::duration<double>(wait_s));
    wait_s *= 2;
  }
  return got;
}

void SlurmExecutor::start_step(const std::string& id, std::vector<std::string> argv, const fs::path& dir, double limit_s) {
  auto flag = std::make_shared<std::atomic<bool>>(false);
  {
    std::lock_guard lock(mutex_);
    step_cancel_[id] = flag;
    states_[id] = "RUNNING";
  }
  watch(id);
  // Launches of a batch start steps from several threads at once.
  std::lock_guard lock(mutex_);
  steps_.emplace_back([this, id, argv = std::move(argv), dir, limit_s, flag] {
    ProcessSpec spec;
    spec.argv = argv;
    spec.env = {{"DENSEFEED_SLURM_KEY", key_}};
    spec.cwd = dir;
    spec.stdout_path = dir / "slurm-step.out";
    spec.stderr_path = dir / "slurm-step.err";
    spec.timeout = std::chrono::milliseconds(static_cast<long long>((limit_s + 300) * 1000));
    spec.cancel = flag.get();
    std::string state;
    try {
      const ProcessResult p = run_process(spec);
      state = p.cancelled ? "CANCELLED" : p.timed_out ? "TIMEOUT" : p.ok() ? "COMPLETED" : "FAILED";
    } catch (const std::exception&) {
      state = "FAILED";
    }
    std::lock_guard lock(mutex_);
    states_[id] = state;
    wake_.notify_all();
  });
}

std::string SlurmExecutor::submit(const AllocationRequest& request, const fs::path& dir, long minutes, std::size_t array) {
  const fs::path script = dir / "job.sh";
  const std::string serve = fmt::format("{} slurm-serve {}{}", shell_quote(options_.densefeed.string()), shell_quote(dir.string()),
                                        array ? " --array" : "");
  write_atomically(script, fmt::format("#!/bin/sh\n# densefeed: {}\nexec {}\n", request.name, serve));
  std::error_code ec;
  fs::permissions(script, fs::perms::owner_all, fs::perm_options::add, ec);
  if (options_.steps) {
    std::string id;
    {
      std::lock_guard lock(mutex_);
      id = fmt::format("step-{}", steps_made_++);
    }
    // One step on one node of the allocation, with only what it asks for.
    std::vector<std::string> argv = {"srun", "--exact", "--nodes=1", "--ntasks=1", "--job-name=" + job_name(request.name),
                                     "--chdir=" + dir.string(), "--kill-on-bad-exit=1"};
    AllocationRequest step = request;
    if (!step.resources.cpus) step.resources.cpus = 1;
    for (auto& o : slurm_resource_options(step, minutes, {}, true)) argv.push_back(o);
    argv.push_back(script.string());
    start_step(id, argv, dir, static_cast<double>(minutes * 60));
    return id;
  }
  std::vector<std::string> argv = {"sbatch", "--parsable", "--job-name=" + job_name(request.name),
                                   "--output=" + (dir / (array ? "slurm-%A_%a.out" : "slurm-%j.out")).string(),
                                   "--error=" + (dir / (array ? "slurm-%A_%a.err" : "slurm-%j.err")).string(),
                                   "--chdir=" + dir.string(), "--export=ALL"};
  for (auto& o : slurm_resource_options(request, minutes, sbatch_environment())) argv.push_back(o);
  if (array) {
    const auto& throttle = request.resources.array_throttle;
    argv.push_back(throttle ? fmt::format("--array=0-{}%{}", array - 1, *throttle) : fmt::format("--array=0-{}", array - 1));
  }
  argv.push_back(script.string());
  // The key in sbatch's environment (exported to the job), not in its argv
  // (which every user of this host can read).
  const Answer a = scheduler(argv, {{"DENSEFEED_SLURM_KEY", key_}});
  std::string id = a.out.substr(0, a.out.find_first_of(";\n"));
  if (!a.ok || id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
    throw InfraError(fmt::format("sbatch for {} {}: {}", request.name, a.describe, a.err.empty() ? a.out : a.err));
  }
  live_add(std::atol(id.c_str()));
  std::ofstream(dir / "job-id") << id << "\n";
  return id;
}

class SlurmAllocation : public Allocation {
 public:
  SlurmAllocation(SlurmExecutor& ex, AllocationRequest request) : ex_(ex), request_(std::move(request)) {}
  ~SlurmAllocation() override;
  LaunchResult run(const Launch& launch) override;

 private:
  LaunchResult attempt(const Launch& launch);
  LaunchResult wait_for(std::size_t n);
  fs::path launch_path(std::size_t n) const { return job_dir_ / fmt::format("launch-{:04}.json", n); }
  fs::path result_path(std::size_t n) const { return job_dir_ / fmt::format("launch-{:04}.result.json", n); }
  void end_job() {
    ex_.unwatch(job_);
    if (job_.rfind("step-", 0) != 0) live_remove(std::atol(job_.c_str()));
    job_.clear();
  }

  SlurmExecutor& ex_;
  AllocationRequest request_;
  int attempts_ = 0;   // jobs submitted so far
  std::string job_;    // the current job ('' = none running)
  fs::path job_dir_;
  std::size_t next_ = 0;
  long minutes_ = 1;
  bool cancelled_by_us_ = false;
  bool outstanding_ = false;  // a launch handed to the job whose result has not been read
  std::chrono::system_clock::time_point submitted_;
};

std::unique_ptr<Allocation> SlurmExecutor::allocate(const AllocationRequest& request) {
  return std::make_unique<SlurmAllocation>(*this, request);
}

SlurmAllocation::~SlurmAllocation() {
  if (job_.empty()) return;
  try {
    write_atomically(job_dir_ / "release", "");
  } catch (const InfraError&) {
  }
  // A released job ends by itself after its last launch (the executor
  // follows it until then, and ends it if it is still running when the
  // executor goes); one still running a launch nobody waits for any more
  // (an exception left run()) is ended now.
  if (outstanding_) {
    ex_.cancel({job_});
    end_job();
  } else {
    ex_.release(job_);
  }
}

LaunchResult SlurmAllocation::run(const Launch& launch) {
  LaunchResult r = attempt(launch);
  if (r.infrastructure.empty() || cancel_requested() || r.scheduler_state == "unknown") return r;
  // Infrastructure is retried once, in a new job.
  const std::string first = r.infrastructure;
  r = attempt(launch);
  if (!r.infrastructure.empty()) r.infrastructure = fmt::format("{}; its retry: {}", first, r.infrastructure);
  return r;
}

LaunchResult SlurmAllocation::attempt(const Launch& launch_in) {
  Launch launch = launch_in;
  // The launch keeps its own timeout, enforced on the node to the second as
  // locally (the gate's timeout_s); Slurm's --time, in whole minutes, is a
  // backstop a minute beyond it for the job as a whole.
  minutes_ = slurm_minutes(std::chrono::duration<double>(request_.time_limit).count() + 60);
  const std::string text = launch_to_json(launch).dump();
  std::size_t n = 0;
  if (job_.empty()) {
    ++attempts_;
    job_dir_ = ex_.job_dir(fmt::format("{}-{}", request_.name, attempts_));
    cancelled_by_us_ = false;
    write_signed_launch(launch_path(0), ex_.key(), text);
    if (request_.launches == 1) write_atomically(job_dir_ / "release", "");
    submitted_ = std::chrono::system_clock::now();
    job_ = ex_.submit(request_, job_dir_, minutes_, 0);
    ex_.watch(job_);
  } else {
    n = next_;
    write_signed_launch(launch_path(n), ex_.key(), text);
  }
  next_ = n + 1;
  outstanding_ = true;
  LaunchResult r = wait_for(n);
  outstanding_ = false;
  // That job is over: the next launch gets a new one.
  if (!r.infrastructure.empty() || r.result.process.ended_by.size()) end_job();
  return r;
}

LaunchResult SlurmAllocation::wait_for(std::size_t n) {
  const bool steps = job_.rfind("step-", 0) == 0;
  bool ended_seen = false;
  auto ended_at = std::chrono::steady_clock::now();
  while (true) {
    if (auto got = read_result_file(result_path(n))) {
      LaunchResult r = std::move(*got);
      const double submitted = std::chrono::duration<double>(submitted_.time_since_epoch()).count();
      if (r.started_at > 0) r.queue_s = std::max(0.0, r.started_at - submitted);
      // A single launch's job ends with it: its accounting (and so its
      // final state) is read; a job of several launches goes on.
      if (request_.launches == 1 && !steps) {
        const auto acc = ex_.account({job_});
        if (auto it = acc.find(job_); it != acc.end()) {
          r.accounting = it->second;
          r.scheduler_state = it->second.state;
        }
      }
      return r;
    }
    if (((request_.cancel && request_.cancel->load()) || cancel_requested()) && !cancelled_by_us_) {
      cancelled_by_us_ = true;
      ex_.cancel({job_});
    }
    std::string state = ex_.state(job_);
    if (classify_slurm_state(state) == SlurmOutcome::pending) {
      ex_.nap();
      continue;
    }
    // Cancelled from outside: `densefeed cancel` scancels by name, and this
    // process hears of the cancel a moment later (its ledger watch).
    if (classify_slurm_state(state) == SlurmOutcome::cancelled && !cancelled_by_us_) {
      for (int i = 0; i < 20 && !cancel_requested(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    // Ended: its result may still be on its way (a shared filesystem).
    if (!ended_seen) {
      ended_seen = true;
      ended_at = std::chrono::steady_clock::now();
    }
    if (std::chrono::steady_clock::now() - ended_at < std::chrono::seconds(2)) {
      ex_.nap();
      continue;
    }
    // The state seen may be a poll old: squeue is asked once more before
    // the job counts as ended (a requeued job is PENDING again by then).
    if (!steps) {
      ex_.refresh();
      state = ex_.state(job_);
      if (classify_slurm_state(state) == SlurmOutcome::pending) {
        ended_seen = false;
        continue;
      }
    }
    std::optional<SchedulerAccounting> acc;
    if (!steps) {
      const auto got = ex_.account({job_});
      if (auto it = got.find(job_); it != got.end()) acc = it->second;
    }
    // Forgotten by squeue: accounting may still say how it ended.
    if (state == "VANISHED" && acc) state = acc->state;
    Ended e{job_, state, job_dir_, job_dir_ / (steps ? "slurm-step.err" : fmt::format("slurm-{}.err", job_)), minutes_,
            std::chrono::duration<double>(request_.time_limit).count(), cancelled_by_us_, ex_.node(job_)};
    LaunchResult r = ended_without_result(e);
    r.accounting = acc;
    return r;
  }
}

// One job array of a batch: launches alike in what they ask for.
struct ArrayJob {
  std::string id;
  fs::path dir;
  std::vector<std::size_t> items;  // task t runs batch[items[t]]
  long minutes = 1;
  double limit_s = 0;
  std::chrono::system_clock::time_point submitted;
};

std::string array_key(const AllocationRequest& r) {
  const ResourceRequest& x = r.resources;
  return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", r.stage, r.name, r.gpus, r.time_limit.count(),
                     x.cpus.value_or(-1), x.mem, x.gpus.value_or(-1), x.gpu_type, x.constraint, x.partition,
                     x.time_min.value_or(-1), x.exclusive ? int(*x.exclusive) : -1) + fmt::format("|{}", x.array_throttle.value_or(-1));
}

std::vector<LaunchResult> SlurmExecutor::run_batch(const std::vector<BatchLaunch>& batch, int requested,
                                                   const std::function<void(std::size_t)>& ended) {
  // Inside an allocation each launch is a step of its own.
  if (options_.steps) return Executor::run_batch(batch, requested, ended);
  std::vector<LaunchResult> results(batch.size());
  std::vector<std::size_t> all(batch.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  for (int round = 1; round <= 2 && !all.empty(); ++round) {
    // One array per group of launches alike in resources and time.
    std::map<std::string, ArrayJob> groups;
    for (std::size_t i : all) {
      ArrayJob& g = groups[array_key(batch[i].request)];
      g.items.push_back(i);
      g.limit_s = std::chrono::duration<double>(batch[i].request.time_limit).count();
      g.minutes = slurm_minutes(g.limit_s + 60);
    }
    std::vector<ArrayJob> arrays;
    for (auto& [key, g] : groups) {
      const AllocationRequest& req = batch[g.items.front()].request;
      g.dir = job_dir(fmt::format("{}-array-{}", req.name, round));
      for (std::size_t t = 0; t < g.items.size(); ++t) {
        write_signed_launch(g.dir / fmt::format("launch-{:04}.json", t), key_, launch_to_json(batch[g.items[t]].launch).dump());
      }
      g.submitted = std::chrono::system_clock::now();
      AllocationRequest array_req = req;
      array_req.name = req.name;
      g.id = submit(array_req, g.dir, g.minutes, g.items.size());
      for (std::size_t t = 0; t < g.items.size(); ++t) watch(fmt::format("{}_{}", g.id, t));
      arrays.push_back(std::move(g));
    }
    std::vector<std::size_t> retry;
    bool cancelled_by_us = false;
    std::map<std::size_t, std::chrono::steady_clock::time_point> ended_at;
    std::set<std::size_t> open(all.begin(), all.end());
    std::map<std::size_t, std::string> task_of;  // batch index -> "ID_T"
    std::map<std::size_t, const ArrayJob*> array_of;
    for (const auto& g : arrays) {
      for (std::size_t t = 0; t < g.items.size(); ++t) {
        task_of[g.items[t]] = fmt::format("{}_{}", g.id, t);
        array_of[g.items[t]] = &g;
      }
    }
    std::map<std::size_t, std::size_t> task_index;
    for (const auto& g : arrays) {
      for (std::size_t t = 0; t < g.items.size(); ++t) task_index[g.items[t]] = t;
    }
    const auto finish = [&](std::size_t i, LaunchResult r) {
      const std::string task = task_of[i];
      unwatch(task);
      open.erase(i);
      if (!r.infrastructure.empty() && round == 1 && !cancel_requested() && r.scheduler_state != "unknown") {
        results[i] = std::move(r);
        retry.push_back(i);
        return;
      }
      if (round == 2 && !r.infrastructure.empty()) r.infrastructure = fmt::format("{}; its retry: {}", results[i].infrastructure, r.infrastructure);
      results[i] = std::move(r);
      if (ended) ended(i);
    };
    while (!open.empty()) {
      bool cancel_now = cancel_requested();
      for (std::size_t i : open) cancel_now = cancel_now || (batch[i].request.cancel && batch[i].request.cancel->load());
      if (cancel_now && !cancelled_by_us) {
        cancelled_by_us = true;
        std::vector<std::string> ids;
        for (const auto& g : arrays) ids.push_back(g.id);
        cancel(ids);
      }
      for (std::size_t i : std::vector<std::size_t>(open.begin(), open.end())) {
        const ArrayJob& g = *array_of[i];
        const std::size_t t = task_index[i];
        if (auto got = read_result_file(g.dir / fmt::format("launch-{:04}.result.json", t))) {
          const double submitted = std::chrono::duration<double>(g.submitted.time_since_epoch()).count();
          if (got->started_at > 0) got->queue_s = std::max(0.0, got->started_at - submitted);
          finish(i, std::move(*got));
          continue;
        }
        const std::string state = this->state(task_of[i]);
        if (classify_slurm_state(state) == SlurmOutcome::pending) continue;
        // Ended: its result may still be on its way (a shared filesystem).
        auto [it, first] = ended_at.emplace(i, std::chrono::steady_clock::now());
        if (std::chrono::steady_clock::now() - it->second < std::chrono::seconds(2)) continue;
        Ended e{task_of[i], state, g.dir, g.dir / fmt::format("slurm-{}.err", task_of[i]), g.minutes, g.limit_s, cancelled_by_us, node(task_of[i])};
        if (state == "VANISHED") {
          const std::string raw = raw_id(task_of[i]);
          const auto acc = account({raw});
          if (auto a = acc.find(raw); a != acc.end()) e.state = a->second.state;
        }
        finish(i, ended_without_result(e));
      }
      if (!open.empty()) nap();
    }
    // Accounting, once per array, for every task: its numeric job id is in
    // its result (slurm-serve's SLURM_JOB_ID) or squeue's %A.
    std::vector<std::string> raws;
    std::map<std::size_t, std::string> raw_of;
    for (std::size_t i : all) {
      std::string raw = results[i].placement.job;
      if (raw.empty() || raw.find_first_not_of("0123456789") != std::string::npos) raw = raw_id(task_of[i]);
      if (raw.find_first_not_of("0123456789") != std::string::npos) continue;
      raw_of[i] = raw;
      raws.push_back(raw);
    }
    const auto acc = account(raws);
    for (const auto& [i, raw] : raw_of) {
      if (auto a = acc.find(raw); a != acc.end()) {
        results[i].accounting = a->second;
        results[i].scheduler_state = a->second.state;
      }
    }
    for (const auto& g : arrays) live_remove(std::atol(g.id.c_str()));
    all = retry;
  }
  return results;
}

}  // namespace

SlurmOutcome classify_slurm_state(std::string_view s) {
  if (s.empty()) return SlurmOutcome::pending;  // not listed yet
  for (const char* p : {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
                        "RESIZING", "RESV_DEL_HOLD", "SIGNALING", "STAGE_OUT", "STOPPED"}) {
    if (s == p) return SlurmOutcome::pending;
  }
  if (s == "COMPLETED" || s == "FAILED") return SlurmOutcome::finished;
  if (s == "TIMEOUT") return SlurmOutcome::timeout;
  if (s.rfind("CANCELLED", 0) == 0) return SlurmOutcome::cancelled;
  return SlurmOutcome::infrastructure;
}

long slurm_minutes(double seconds) { return std::max(1L, static_cast<long>(std::ceil(seconds / 60.0))); }

std::string slurm_ledger_prefix(const std::filesystem::path& ledger) {
  return "densefeed-" + sha256_hex(std::filesystem::absolute(ledger).lexically_normal().string()).substr(0, 8) + "-";
}

std::string slurm_experiment_prefix(const std::filesystem::path& ledger, std::int64_t id) {
  return slurm_ledger_prefix(ledger) + fmt::format("e{}-", id);
}

std::vector<SlurmJob> slurm_jobs_with_prefix(const std::string& prefix) {
  const Answer a = scheduler({"squeue", "-h", "--states=all", "-u", std::to_string(::getuid()), "-o", "%i|%T|%j"});
  if (!a.ok) throw InfraError(fmt::format("squeue {}: {}", a.describe, a.err));
  std::vector<SlurmJob> jobs;
  std::istringstream in(a.out);
  for (std::string line; std::getline(in, line);) {
    const auto b1 = line.find('|'), b2 = line.find('|', b1 + 1);
    if (b1 == std::string::npos || b2 == std::string::npos) continue;
    SlurmJob j{line.substr(0, b1), line.substr(b2 + 1), line.substr(b1 + 1, b2 - b1 - 1)};
    if (j.name.rfind(prefix, 0) == 0) jobs.push_back(std::move(j));
  }
  return jobs;
}

std::vector<SlurmJob> slurm_cancel_prefix(const std::string& prefix) {
  std::vector<SlurmJob> live;
  for (auto& j : slurm_jobs_with_prefix(prefix)) {
    if (classify_slurm_state(j.state) == SlurmOutcome::pending) live.push_back(std::move(j));
  }
  if (live.empty()) return live;
  std::vector<std::string> argv = {"scancel", "--quiet"};
  for (const auto& j : live) argv.push_back(j.id);
  const Answer a = scheduler(argv);
  if (!a.ok) throw InfraError(fmt::format("scancel {}: {}", a.describe, a.err));
  return live;
}

bool slurm_available() {
  if (resolve_executable("squeue").empty()) return false;
  return scheduler({"squeue", "-h", "-o", "%i"}).ok;
}

std::unique_ptr<Executor> make_slurm_executor(const SlurmOptions& options) { return std::make_unique<SlurmExecutor>(options); }

}  // namespace densefeed
