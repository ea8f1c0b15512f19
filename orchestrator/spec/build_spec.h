// How a revision is built: commands run in order in the revision's clean
// export ({src}) with its own build folder ({build}); its harnesses are then
// looked up in `bin` first. From a gate's `build` section or, when the gate
// has none, the project's (densefeed.yaml).
#pragma once

#include <string>
#include <vector>

#include "process_limits.h"

namespace densefeed {

struct BuildSpec {
  std::vector<std::vector<std::string>> commands;  // argv templates ({src}, {build})
  std::string bin = "{build}/bin";
  double timeout_s = kDefaultBuildTimeoutS;  // per command, seconds
};

}  // namespace densefeed
