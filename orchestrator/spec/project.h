// A project: the user's repository that densefeed runs in, configured by its
// densefeed.yaml (schemas/project.schema.json). densefeed finds it the way
// git finds .git: from the current directory upwards to the first folder
// holding densefeed.yaml, or the folder given with --project. densefeed's own
// repository is one project among others.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "build_spec.h"
#include "resources_spec.h"
#include "yaml_document.h"

namespace densefeed {

inline constexpr const char* kProjectFile = "densefeed.yaml";

struct Project {
  std::filesystem::path dir;          // absolute: the folder holding densefeed.yaml
  YamlDocument config;                // densefeed.yaml as read (marks for errors)
  std::string gates = "gates";        // relative to dir
  std::string experiments = "experiments";
  std::filesystem::path ledger;       // absolute (default dir/.densefeed/ledger.db)
  std::string trusted_ref = "main";
  // The ledger chain's key file (ledger_key.h); empty: the default under
  // ~/.config/densefeed/keys/. Never inside the ledger's folder.
  std::filesystem::path ledger_key;
  std::string python_interpreter;     // as configured; "" = the first python3 that imports numpy
  std::vector<std::filesystem::path> python_path;  // absolute, first on every harness's PYTHONPATH
  std::vector<std::string> harness_path;           // relative to the tree an arm runs from
  // service: the socket of the densefeed service that serves this project
  // (absolute; empty: none, verbs run here).
  std::filesystem::path service;
  bool require_service = false;  // audit fails on same-user experiments
  // sandbox.env: names (a trailing '*' matches a prefix) of densefeed's
  // environment variables that untrusted commands also get (untrusted_launch.h).
  std::vector<std::string> sandbox_env;
  // resources: what scheduler jobs ask for, per stage, below each gate's
  // own (resources_spec.h).
  StageResources resources;
  std::optional<BuildSpec> build;     // how a revision builds when its gate says nothing
  // Git: the repository's top and `dir` relative to it ("" at the top, else
  // "sub/dir/"); repo_top is empty when dir is in no git repository.
  std::filesystem::path repo_top;
  std::string prefix;

  std::filesystem::path config_file() const { return dir / kProjectFile; }
  bool in_git() const { return !repo_top.empty(); }
};

// Finds and reads the project: `explicit_dir` when not empty (it must hold
// densefeed.yaml), else the first of `start` and its ancestors that does.
// Throws InputError: no densefeed.yaml (naming every folder searched and
// suggesting `densefeed init`), or one that fails its schema (file, line,
// column, expected).
Project find_project(const std::filesystem::path& start, const std::filesystem::path& explicit_dir = {});

// Reads DIR/densefeed.yaml. Throws InputError as find_project does.
Project load_project(const std::filesystem::path& dir);
// The project folder `dir` configured by `file` (another copy of its
// densefeed.yaml: the trusted ref's). Throws InputError as load_project does.
Project load_project_from(const std::filesystem::path& dir, const std::filesystem::path& file);

// The project as its trusted ref configures it: densefeed.yaml read from the
// trusted ref's export (`trusted_tree`), paths still resolved against the
// project folder. What decides how the reference and untrusted commands run
// (python, harness_path, sandbox.env, build, ledger_key, gates) is never taken
// from a worktree or branch the agent controls. Without densefeed.yaml at the
// trusted ref, the worktree's project is returned unchanged.
Project trusted_project(const Project& worktree, const std::filesystem::path& trusted_tree);

// The interpreter that python3/python in a harness command becomes: the
// configured one (checked once per process to import numpy), or the first
// python3 in PATH, then /usr/bin/python3, that does. Throws InputError naming
// densefeed.yaml's python.interpreter (or, unconfigured, every interpreter
// tried) when none imports numpy.
std::filesystem::path harness_python(const Project& project);

}  // namespace densefeed
