#include "executor_factory.h"

#include <algorithm>
#include <cstdlib>

#include "process_runner.h"
#include "slurm_executor.h"

namespace densefeed {

std::shared_ptr<Executor> make_executor(const std::string& name) {
  if (is_slurm_executor(name)) {
    SlurmOptions o;
    o.densefeed = self_dir() / "densefeed";
    o.steps = name == "slurm-steps";
    if (const char* poll = std::getenv("DENSEFEED_SLURM_POLL_S")) o.poll_s = std::max(0.02, std::atof(poll));
    if (const char* max = std::getenv("DENSEFEED_SLURM_POLL_MAX_S")) o.poll_max_s = std::atof(max);
    o.poll_max_s = std::max(o.poll_s, o.poll_max_s);
    return make_slurm_executor(o);
  }
  return make_local_executor();
}

bool is_slurm_executor(const std::string& name) { return name == "slurm" || name == "slurm-steps"; }

}  // namespace densefeed
