// `densefeed init`: a new project in a git repository, from the templates
// installed with densefeed (share/densefeed/init): densefeed.yaml, a sample
// gate with a Python/numpy harness pair (a sharded scan against its
// unpartitioned float64 reference), its gates.lock, two sample experiments
// (one green, one red whose error grows with the shard count), and a
// .densefeed/.gitignore that keeps the workspace out of git.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace densefeed {

struct InitResult {
  std::filesystem::path dir;         // the project folder
  std::string trusted_ref;           // written into densefeed.yaml
  std::vector<std::string> written;  // files written, relative to dir
};

// Writes the project into `dir`, which must be inside a git work tree. The
// trusted ref is `main` when that branch exists or is checked out, else the
// branch checked out (e.g. master). Refuses (InputError naming every file
// that exists) to overwrite anything; InputError when dir is not in git.
InitResult init_project(const std::filesystem::path& dir);

}  // namespace densefeed
