#include "slurm_serve.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "error.h"
#include "executor.h"
#include "launch_json.h"
#include "ledger_key.h"

namespace densefeed {
namespace {

namespace fs = std::filesystem;

std::atomic<bool> g_usr1{false};
extern "C" void on_usr1(int) { g_usr1 = true; }

fs::path launch_file(const fs::path& dir, std::size_t n) { return dir / fmt::format("launch-{:04}.json", n); }
fs::path result_file(const fs::path& dir, std::size_t n) { return dir / fmt::format("launch-{:04}.result.json", n); }

// Reads launch n, refusing one whose HMAC is not the key's.
std::unique_ptr<DecodedLaunch> read_launch(const fs::path& dir, std::size_t n, const std::string& key) {
  const fs::path file = launch_file(dir, n);
  try {
    std::ifstream in(file, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ifstream mac_in(file.string() + ".hmac");
    std::string mac;
    mac_in >> mac;
    // Only what densefeed wrote runs: a launch file planted by anything
    // else (it would choose its own command, trusted or not) is refused.
    if (mac != hmac_sha256_hex(key, text)) {
      throw InfraError(fmt::format("{}: refused: its HMAC does not match the key of the densefeed that submitted this job "
                                   "(a launch file densefeed did not write)", file.string()));
    }
    return launch_from_json(nlohmann::json::parse(text));
  } catch (const nlohmann::json::exception& e) {
    throw InfraError(fmt::format("{}: not a launch: {}", file.string(), e.what()));
  }
}

void write_result(const fs::path& dir, std::size_t n, const LaunchResult& r) {
  const fs::path result = result_file(dir, n);
  const fs::path tmp = result.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << launch_result_to_json(r).dump() << "\n";
    out.close();
    if (!out) throw InfraError(fmt::format("{}: cannot write the launch's result", tmp.string()));
  }
  std::error_code ec;
  fs::rename(tmp, result, ec);
  if (ec) throw InfraError(fmt::format("{}: cannot rename into place: {}", result.string(), ec.message()));
}

int exit_status(const ProcessResult& p) { return !p.started ? 1 : p.timed_out ? 124 : p.signal != 0 ? 128 + p.signal : p.exit_code; }

}  // namespace

int slurm_serve(const fs::path& dir, bool array, double idle_s) {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* step = std::getenv("SLURM_STEP_ID");
  const char* gpus = std::getenv("CUDA_VISIBLE_DEVICES");
  std::string where = job ? job : "?";
  if (step && *step) where += std::string(".") + step;
  const Placement placement{"slurm", where, host};
  // The key densefeed signs its launch files with; no launch sees it.
  const char* key_env = std::getenv("DENSEFEED_SLURM_KEY");
  if (!key_env || std::string(key_env).size() < 32) {
    throw InfraError("slurm-serve: DENSEFEED_SLURM_KEY is not set: this job was not submitted by densefeed's Slurm executor");
  }
  const std::string key = key_env;
  ::unsetenv("DENSEFEED_SLURM_KEY");
  struct sigaction sa {};
  sa.sa_handler = on_usr1;
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &sa, nullptr);
  const double started_at = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const auto run_one = [&](std::size_t n) {
    const std::unique_ptr<DecodedLaunch> decoded = read_launch(dir, n, key);
    // The same local launch as on the collecting machine.
    LaunchResult r = make_local_executor()->allocate({})->run(decoded->launch);
    r.placement = placement;
    r.gpu = gpus ? gpus : "";
    r.started_at = started_at;
    write_result(dir, n, r);
    return exit_status(r.result.process);
  };
  std::error_code ec;
  if (array) {
    const char* task = std::getenv("SLURM_ARRAY_TASK_ID");
    if (!task || std::string(task).find_first_not_of("0123456789") != std::string::npos || !*task) {
      throw InfraError("slurm-serve --array: SLURM_ARRAY_TASK_ID is not set: this is not a task of a job array");
    }
    const std::size_t n = std::stoul(task);
    if (fs::exists(result_file(dir, n), ec)) return 0;  // requeued after its result was in
    return run_one(n);
  }
  // A requeued job resumes after the launches whose results are in.
  std::size_t n = 0;
  while (fs::exists(result_file(dir, n), ec)) ++n;
  if (n > 0) std::fprintf(stderr, "densefeed slurm-serve: resuming after %zu finished launches (a requeued job)\n", n);
  fs::remove(dir / "interrupted", ec);
  int status = 0;
  auto idle_since = std::chrono::steady_clock::now();
  while (true) {
    if (g_usr1) {
      std::ofstream(dir / "interrupted") << n << "\n";
      std::fprintf(stderr, "densefeed slurm-serve: SIGUSR1 (time limit or preemption near): stopped after %zu launches\n", n);
      return 0;
    }
    if (!fs::exists(launch_file(dir, n), ec)) {
      if (fs::exists(dir / "release", ec)) return status;
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - idle_since).count() > idle_s) return status;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    status = run_one(n);
    ++n;
    idle_since = std::chrono::steady_clock::now();
  }
}

}  // namespace densefeed
