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

namespace densefeed {

int slurm_serve(const std::filesystem::path& dir, double idle_s) {
  namespace fs = std::filesystem;
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* gpus = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string placement = fmt::format("slurm job {} on {}", job ? job : "?", host);
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
      std::ifstream in(launch_file);
      decoded = launch_from_json(nlohmann::json::parse(in));
    } catch (const nlohmann::json::exception& e) {
      throw InfraError(fmt::format("{}: not a launch: {}", launch_file.string(), e.what()));
    }
    // The same local launch as on the collecting machine.
    LaunchResult r = make_local_executor()->allocate({})->run(decoded->launch);
    r.placement = placement;
    r.gpu = gpus ? gpus : "";
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
