// The machine and build a benchmark ran on, recorded beside its results.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace densefeed {

struct Environment {
  std::string host;
  std::string cpu_model;     // /proc/cpuinfo "model name"
  nlohmann::json gpus = nlohmann::json::array();  // [{name, uuid, driver}] from nvidia-smi
  std::string cuda_version;  // nvcc --version's release line, "" without nvcc
  std::string compiler;      // densefeed's own build (harnesses of WORKTREE arms share it)
  std::string flags;
};

// Reads it; commands that are missing (no GPU, no nvcc) leave their fields
// empty. Never throws.
Environment collect_environment();

}  // namespace densefeed
