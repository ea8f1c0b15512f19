#include "executor_factory.h"

#include <algorithm>
#include <cstdlib>

#include "process_runner.h"
#include "slurm_executor.h"

namespace densefeed {

std::shared_ptr<Executor> make_executor(const std::string& name) {
  if (name == "slurm") {
    SlurmOptions o;
    o.densefeed = self_dir() / "densefeed";
    if (const char* poll = std::getenv("DENSEFEED_SLURM_POLL_S")) o.poll_s = std::max(0.02, std::atof(poll));
    return make_slurm_executor(o);
  }
  return make_local_executor();
}

}  // namespace densefeed
