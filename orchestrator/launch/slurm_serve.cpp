#include "slurm_serve.h"

#include <unistd.h>

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

int slurm_serve(const std::filesystem::path& dir, double idle_s) {
  namespace fs = std::filesystem;
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* gpus = std::getenv("CUDA_VISIBLE_DEVICES");
  const Placement placement{"slurm", job ? job : "?", host};
  // The key densefeed signs its launch files with; no launch sees it.
  const char* key_env = std::getenv("DENSEFEED_SLURM_KEY");
  if (!key_env || std::string(key_env).size() < 32) {
    throw InfraError("slurm-serve: DENSEFEED_SLURM_KEY is not set: this job was not submitted by densefeed's Slurm executor");
  }
  const std::string key = key_env;
  ::unsetenv("DENSEFEED_SLURM_KEY");
  const double started_at = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  int status = 0;
  auto idle_since = std::chrono::steady_clock::now();
  for (std::size_t n = 0;; ) {
    const fs::path launch_file = dir / fmt::format("launch-{:04}.json", n);
    std::error_code ec;
    if (!fs::exists(launch_file, ec)) {
      if (fs::exists(dir / "release", ec)) return status;
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - idle_since).count() > idle_s) return status;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    std::unique_ptr<DecodedLaunch> decoded;
    try {
      std::ifstream in(launch_file, std::ios::binary);
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::ifstream mac_in(launch_file.string() + ".hmac");
      std::string mac;
      mac_in >> mac;
      // Only what densefeed wrote runs: a launch file planted by anything
      // else (it would choose its own command, trusted or not) is refused.
      if (mac != hmac_sha256_hex(key, text)) {
        throw InfraError(fmt::format("{}: refused: its HMAC does not match the key of the densefeed that submitted this job "
                                     "(a launch file densefeed did not write)", launch_file.string()));
      }
      decoded = launch_from_json(nlohmann::json::parse(text));
    } catch (const nlohmann::json::exception& e) {
      throw InfraError(fmt::format("{}: not a launch: {}", launch_file.string(), e.what()));
    }
    // The same local launch as on the collecting machine.
    LaunchResult r = make_local_executor()->allocate({})->run(decoded->launch);
    r.placement = placement;
    r.gpu = gpus ? gpus : "";
    r.started_at = started_at;
    const fs::path result = dir / fmt::format("launch-{:04}.result.json", n);
    const fs::path tmp = result.string() + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << launch_result_to_json(r).dump() << "\n";
      out.close();
      if (!out) throw InfraError(fmt::format("{}: cannot write the launch's result", tmp.string()));
    }
    fs::rename(tmp, result, ec);
    if (ec) throw InfraError(fmt::format("{}: cannot rename into place: {}", result.string(), ec.message()));
    const ProcessResult& p = r.result.process;
    status = !p.started ? 1 : p.timed_out ? 124 : p.signal != 0 ? 128 + p.signal : p.exit_code;
    ++n;
    idle_since = std::chrono::steady_clock::now();
  }
}

}  // namespace densefeed
