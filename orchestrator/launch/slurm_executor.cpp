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
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "error.h"
#include "launch_json.h"
#include "ledger_key.h"
#include "sha256.h"

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

class SlurmAllocation : public Allocation {
 public:
  SlurmAllocation(SlurmExecutor& ex, AllocationRequest request) : ex_(ex), request_(std::move(request)) {}
  ~SlurmAllocation() override;
  LaunchResult run(const Launch& launch) override;

 private:
  LaunchResult attempt(const Launch& launch);
  LaunchResult wait_for(std::size_t n);
  void submit(const std::string& first_launch);
  fs::path launch_path(std::size_t n) const { return job_dir_ / fmt::format("launch-{:04}.json", n); }
  void write_launch(std::size_t n, const std::string& text);
  fs::path result_path(std::size_t n) const { return job_dir_ / fmt::format("launch-{:04}.result.json", n); }

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

class SlurmExecutor : public Executor {
 public:
  explicit SlurmExecutor(SlurmOptions o) : options_(std::move(o)) {
    const auto scancel = resolve_executable("scancel");
    if (resolve_executable("sbatch").empty() || resolve_executable("squeue").empty() || scancel.empty()) {
      throw InfraError("--executor slurm: sbatch, squeue and scancel must be on PATH (Debian: slurm-client)");
    }
    std::snprintf(g_scancel, sizeof g_scancel, "%s", scancel.c_str());
    add_termination_hook(cancel_live_jobs);
    poller_ = std::thread([this] { poll(); });
  }
  ~SlurmExecutor() override {
    std::vector<std::string> live;
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      for (const auto& id : watched_) {
        if (classify_slurm_state(states_[id]) == SlurmOutcome::pending) live.push_back(id);
      }
    }
    wake_.notify_all();
    poller_.join();
    cancel(live);
  }

  std::unique_ptr<Allocation> allocate(const AllocationRequest& request) override {
    return std::make_unique<SlurmAllocation>(*this, request);
  }
  bool assigns_gpus() const override { return false; }
  int concurrency(int, std::size_t jobs) const override { return static_cast<int>(std::clamp<std::size_t>(jobs, 1, 512)); }
  std::string name() const override { return "slurm"; }

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
    std::lock_guard lock(mutex_);
    if (root_.empty()) root_ = fs::temp_directory_path() / fmt::format("densefeed-slurm-jobs-{}", ::getpid());
    return root_ / fmt::format("{:05}-{}", jobs_made_++, name);
  }
  // The key launch files are signed with (HMAC-SHA256): slurm-serve runs
  // only what carries it; it reaches the job through sbatch's environment.
  const std::string& key() const { return key_; }
  std::string node(const std::string& id) {
    std::lock_guard lock(mutex_);
    return nodes_[id];
  }
  const SlurmOptions& options() const { return options_; }

  void watch(const std::string& id) {
    std::lock_guard lock(mutex_);
    watched_.insert(id);
    states_[id] = "";
    unseen_[id] = 0;
    live_add(std::atol(id.c_str()));
  }
  void unwatch(const std::string& id) {
    std::lock_guard lock(mutex_);
    watched_.erase(id);
    states_.erase(id);
    unseen_.erase(id);
    live_remove(std::atol(id.c_str()));
  }
  // The job's last known state: '' not seen yet, "VANISHED" when squeue
  // stopped listing it (or never did within 20 polls).
  std::string state(const std::string& id) {
    std::lock_guard lock(mutex_);
    return states_[id];
  }
  // Waits for the next poll (at most two intervals).
  void wait_poll() {
    std::unique_lock lock(mutex_);
    const auto seen = polls_;
    wake_.wait_for(lock, std::chrono::duration<double>(2 * options_.poll_s), [&] { return polls_ != seen || stop_; });
  }
  void cancel(const std::vector<std::string>& ids) {
    if (ids.empty()) return;
    std::vector<std::string> argv = {"scancel", "--quiet"};
    argv.insert(argv.end(), ids.begin(), ids.end());
    scheduler(argv);
  }

 private:
  void poll() {
    const std::string uid = std::to_string(::getuid());
    std::unique_lock lock(mutex_);
    while (!stop_) {
      if (!watched_.empty()) {
        lock.unlock();
        const Answer a = scheduler({"squeue", "-h", "--states=all", "-u", uid, "-o", "%i|%T|%N"});
        lock.lock();
        if (a.ok) {
          std::map<std::string, std::string> listed;
          std::istringstream in(a.out);
          for (std::string line; std::getline(in, line);) {
            const auto bar = line.find('|'), bar2 = line.find('|', bar + 1);
            if (bar == std::string::npos || bar2 == std::string::npos) continue;
            listed[line.substr(0, bar)] = line.substr(bar + 1, bar2 - bar - 1);
            if (bar2 + 1 < line.size()) nodes_[line.substr(0, bar)] = line.substr(bar2 + 1);
          }
          for (const auto& id : watched_) {
            if (auto it = listed.find(id); it != listed.end()) {
              states_[id] = it->second;
              unseen_[id] = 0;
            } else if (++unseen_[id] >= (states_[id].empty() ? 20 : 2)) {
              states_[id] = "VANISHED";
            }
          }
        }
        ++polls_;
        wake_.notify_all();
      }
      wake_.wait_for(lock, std::chrono::duration<double>(options_.poll_s), [&] { return stop_; });
    }
  }

  SlurmOptions options_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string prefix_ = "densefeed-adhoc-";
  fs::path root_;
  std::uint64_t jobs_made_ = 0;
  std::string key_ = random_key();
  std::map<std::string, std::string> nodes_;
  std::set<std::string> watched_;
  std::map<std::string, std::string> states_;
  std::map<std::string, int> unseen_;
  std::uint64_t polls_ = 0;
  bool stop_ = false;
  std::thread poller_;
};

void SlurmAllocation::write_launch(std::size_t n, const std::string& text) {
  // The HMAC first: slurm-serve reads a launch only once its file exists.
  write_atomically(fs::path(launch_path(n).string() + ".hmac"), hmac_sha256_hex(ex_.key(), text));
  write_atomically(launch_path(n), text);
}

SlurmAllocation::~SlurmAllocation() {
  if (job_.empty()) return;
  try {
    write_atomically(job_dir_ / "release", "");
  } catch (const InfraError&) {
  }
  // A released job ends by itself after its last launch; one still running
  // a launch nobody waits for any more (an exception left run()) is ended.
  if (outstanding_) {
    ex_.cancel({job_});
  } else {
    // Released: it ends within a poll or two. One that goes on running
    // (whatever it found to run) is ended: no job outlives its allocation.
    for (int i = 0; i < 40 && classify_slurm_state(ex_.state(job_)) == SlurmOutcome::pending; ++i) ex_.wait_poll();
    if (classify_slurm_state(ex_.state(job_)) == SlurmOutcome::pending) ex_.cancel({job_});
  }
  ex_.unwatch(job_);
}

void SlurmAllocation::submit(const std::string& first_launch) {
  ++attempts_;
  job_dir_ = ex_.job_dir(fmt::format("{}-{}", request_.name, attempts_));
  std::error_code ec;
  fs::remove_all(job_dir_, ec);
  fs::create_directories(job_dir_, ec);
  if (ec) throw InfraError(fmt::format("{}: cannot create the Slurm job folder: {}", job_dir_.string(), ec.message()));
  next_ = 0;
  cancelled_by_us_ = false;
  if (!first_launch.empty()) {
    write_launch(0, first_launch);
    write_atomically(job_dir_ / "release", "");
  }
  const fs::path script = job_dir_ / "job.sh";
  write_atomically(script, fmt::format("#!/bin/sh\n# densefeed: {}\nexec {} slurm-serve {}\n", request_.name,
                                       shell_quote(ex_.options().densefeed.string()), shell_quote(job_dir_.string())));
  fs::permissions(script, fs::perms::owner_all, fs::perm_options::add, ec);
  std::vector<std::string> argv = {"sbatch", "--parsable", "--job-name=" + ex_.job_name(request_.name),
                                   "--output=" + (job_dir_ / "slurm-%j.out").string(),
                                   "--error=" + (job_dir_ / "slurm-%j.err").string(), "--chdir=" + job_dir_.string(),
                                   fmt::format("--time={}", minutes_), "--export=ALL"};
  if (request_.gpus > 0) argv.push_back(fmt::format("--gres=gpu:{}", request_.gpus));
  argv.push_back(script.string());
  submitted_ = std::chrono::system_clock::now();
  // The key in sbatch's environment (exported to the job), not in its argv
  // (which every user of this host can read).
  const Answer a = scheduler(argv, {{"DENSEFEED_SLURM_KEY", ex_.key()}});
  std::string id = a.out.substr(0, a.out.find_first_of(";\n"));
  if (!a.ok || id.empty() || id.find_first_not_of("0123456789") != std::string::npos) {
    throw InfraError(fmt::format("sbatch for {} {}: {}", request_.name, a.describe, a.err.empty() ? a.out : a.err));
  }
  job_ = id;
  ex_.watch(job_);
  std::ofstream(job_dir_ / "job-id") << job_ << "\n";
}

LaunchResult SlurmAllocation::run(const Launch& launch) {
  LaunchResult r = attempt(launch);
  if (r.infrastructure.empty() || cancel_requested()) return r;
  // Infrastructure is retried once, in a new job.
  const std::string first = r.infrastructure;
  r = attempt(launch);
  if (!r.infrastructure.empty()) r.infrastructure = fmt::format("{}; its retry: {}", first, r.infrastructure);
  return r;
}

LaunchResult SlurmAllocation::attempt(const Launch& launch_in) {
  Launch launch = launch_in;
  const bool single = request_.launches == 1;
  // The launch keeps its own timeout, enforced on the node to the second as
  // locally (the gate's timeout_s); Slurm's --time, in whole minutes, is a
  // backstop a minute beyond it for the job as a whole.
  minutes_ = slurm_minutes(std::chrono::duration<double>(request_.time_limit).count() + 60);
  const std::string text = launch_to_json(launch).dump();
  std::size_t n = 0;
  if (job_.empty()) {
    submit(single ? text : "");
    if (!single) write_launch(0, text);
  } else {
    n = next_;
    write_launch(n, text);
  }
  next_ = n + 1;
  outstanding_ = true;
  LaunchResult r = wait_for(n);
  outstanding_ = false;
  if (!r.infrastructure.empty() || r.result.process.ended_by.size()) {
    // That job is over: the next launch gets a new one.
    ex_.unwatch(job_);
    job_.clear();
  }
  return r;
}

LaunchResult SlurmAllocation::wait_for(std::size_t n) {
  const auto read_result = [&](LaunchResult& r) {
    std::ifstream in(result_path(n));
    if (!in) return false;
    try {
      r = launch_result_from_json(J::parse(in));
      return true;
    } catch (const nlohmann::json::exception& e) {
      throw InfraError(fmt::format("{}: not a launch result: {}", result_path(n).string(), e.what()));
    }
  };
  LaunchResult r;
  // A single launch's job ends with its launch: its final state is waited
  // for (a few polls) and recorded; a job of several launches goes on.
  const auto with_state = [&](LaunchResult& got) {
    if (request_.launches != 1) return;
    for (int i = 0; i < 40; ++i) {
      const std::string state = ex_.state(job_);
      if (classify_slurm_state(state) != SlurmOutcome::pending) {
        if (state != "VANISHED") got.scheduler_state = state;
        return;
      }
      ex_.wait_poll();
    }
  };
  while (true) {
    if (read_result(r)) {
      with_state(r);
      const double submitted = std::chrono::duration<double>(submitted_.time_since_epoch()).count();
      if (r.started_at > 0) r.queue_s = std::max(0.0, r.started_at - submitted);
      return r;
    }
    if (((request_.cancel && request_.cancel->load()) || cancel_requested()) && !cancelled_by_us_) {
      cancelled_by_us_ = true;
      ex_.cancel({job_});
    }
    const std::string state = ex_.state(job_);
    const SlurmOutcome outcome = classify_slurm_state(state);
    if (outcome == SlurmOutcome::pending) {
      ex_.wait_poll();
      continue;
    }
    // Cancelled from outside: `densefeed cancel` scancels by name, and this
    // process hears of the cancel a moment later (its ledger watch).
    if (outcome == SlurmOutcome::cancelled && !cancelled_by_us_) {
      for (int i = 0; i < 20 && !cancel_requested(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    // Ended: its result may still be on its way (a shared filesystem).
    for (int i = 0; i < 20; ++i) {
      if (read_result(r)) {
        if (state != "VANISHED") r.scheduler_state = state;
        return r;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const fs::path err = job_dir_ / fmt::format("slurm-{}.err", job_);
    const std::string tail = slurp_tail(err);
    r = LaunchResult{};
    const std::string node = ex_.node(job_);
    r.placement = Placement{"slurm", job_, node};
    if (state != "VANISHED") r.scheduler_state = state;
    ProcessResult& p = r.result.process;
    p.started = true;
    if (outcome == SlurmOutcome::timeout) {
      p.timed_out = true;
      p.timeout_s = static_cast<double>(minutes_ * 60);
      p.ended_by = fmt::format("Slurm job {} ended TIMEOUT: it ran past its Slurm time limit (asked for {} min: the launch's {:g} s "
                               "plus a minute, in whole minutes)",
                               job_, minutes_, std::chrono::duration<double>(request_.time_limit).count());
    } else if (outcome == SlurmOutcome::cancelled && (cancelled_by_us_ || cancel_requested())) {
      p.cancelled = true;
      p.ended_by = fmt::format("densefeed scancelled Slurm job {}", job_);
    } else {
      const char* why = outcome == SlurmOutcome::finished ? " without writing its result" : "";
      r.infrastructure = state == "VANISHED"
                             ? fmt::format("Slurm job {} is no longer known to Slurm and left no result", job_)
                             : fmt::format("Slurm job {} ended {}{}{}", job_, state, why, tail.empty() ? "" : " (" + err.string() + ": " + tail + ")");
    }
    return r;
  }
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
