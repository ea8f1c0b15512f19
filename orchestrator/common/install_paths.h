// Where densefeed's own run-time data lies: the JSON Schemas, the agent skill
// and its references, the Python harness module. It is found relative to the
// running executable, never in the source tree, so that `build/bin/densefeed`
// and an installed `PREFIX/bin/densefeed` find it the same way: the build
// folder mirrors the install layout (build/share/densefeed, see
// orchestrator/CMakeLists.txt).
//
//   PREFIX/bin/densefeed
//   PREFIX/share/densefeed/schemas/*.schema.json, ledger.md
//   PREFIX/share/densefeed/skills/densefeed-optimization-loop/SKILL.md, reference/
//   PREFIX/share/densefeed/python/densefeed_harness.py
//
// A project's own files (gates, experiments, ledger) are not data of densefeed
// and are never looked up here.
#pragma once

#include <filesystem>
#include <string_view>

namespace densefeed {

// The running executable, read from /proc/self/exe (absolute, links resolved).
// Throws InfraError when /proc/self/exe cannot be read.
std::filesystem::path running_executable();

// EXECUTABLE's data folder: the lexically normal form of
// EXECUTABLE/../../share/densefeed (EXECUTABLE sits in PREFIX/bin). Throws
// InfraError naming the folder looked at when it is not a directory.
std::filesystem::path data_dir_of(const std::filesystem::path& executable);

// data_dir_of(running_executable()).
std::filesystem::path data_dir();

// data_dir()/schemas: the JSON Schemas of every document densefeed reads or
// prints, and ledger.md. Throws InfraError naming it when missing.
std::filesystem::path schemas_dir();

// schemas_dir()/NAME, e.g. schema_path("gate.schema.json"). NAME is a bare
// file name. Throws InfraError naming the file when it does not exist, or when
// NAME is not a bare file name.
std::filesystem::path schema_path(std::string_view name);

// data_dir()/skills/densefeed-optimization-loop: the agent skill (SKILL.md and
// reference/). Its path relative to data_dir() is the skill's resource name
// (skills/densefeed-optimization-loop/SKILL.md). Throws InfraError naming it
// when missing.
std::filesystem::path skill_dir();

// data_dir()/python: the folder that holds densefeed_harness.py, for a
// harness's PYTHONPATH. Throws InfraError naming the module when missing.
std::filesystem::path python_module_dir();

}  // namespace densefeed
