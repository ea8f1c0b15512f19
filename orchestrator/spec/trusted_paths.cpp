#include "trusted_paths.h"

#include <cstdlib>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "error.h"
#include "install_paths.h"
#include "process_runner.h"

namespace densefeed {
namespace {

bool lexically_inside(const std::filesystem::path& p, const std::filesystem::path& dir) {
  const auto a = p.lexically_normal().string(), d = dir.lexically_normal().string();
  if (d.empty()) return false;
  return a == d || (a.size() > d.size() && a.compare(0, d.size(), d) == 0 && (d.back() == '/' || a[d.size()] == '/'));
}

// The path as given and, where links lead elsewhere, its real place.
std::vector<std::filesystem::path> both_places(const std::filesystem::path& p) {
  std::vector<std::filesystem::path> out = {std::filesystem::absolute(p).lexically_normal()};
  std::error_code ec;
  const auto real = std::filesystem::weakly_canonical(out[0], ec);
  if (!ec && real != out[0]) out.push_back(real);
  return out;
}

// densefeed.yaml's field as the user edits it (the project folder's file),
// with the line of the trusted ref's copy that is in force.
[[noreturn]] void config_fail(const Project& project, const std::string& pointer, const std::string& field, const std::string& message) {
  throw InputError(project.config_file().string(), project.config.mark_of(pointer), field,
                   message + fmt::format(" (densefeed.yaml as committed on the trusted ref '{}' is the one in force)", project.trusted_ref));
}

}  // namespace

bool TrustedGround::admits(const std::filesystem::path& p) const {
  if (worktree) return true;
  for (const auto& place : both_places(p)) {
    bool in_project = false;
    for (const auto& root : both_places(project)) in_project = in_project || lexically_inside(place, root);
    if (!in_project) continue;
    bool ok = false;
    for (const auto& a : allowed) {
      for (const auto& root : both_places(a)) ok = ok || lexically_inside(place, root);
    }
    if (!ok) return false;
  }
  return true;
}

TrustedGround trusted_ground(const Project& project, const GateStore& store, const std::filesystem::path& build_dir) {
  TrustedGround g;
  g.project = project.dir;
  g.worktree = store.worktree;
  g.allowed.push_back(store.root);
  if (!build_dir.empty()) g.allowed.push_back(build_dir);
  try {
    g.allowed.push_back(data_dir());
    g.allowed.push_back(running_executable().parent_path());
  } catch (const InfraError&) {
  }
  return g;
}

std::filesystem::path trusted_python(const Project& project, const GateStore& store) {
  if (store.worktree) return harness_python(project);
  const TrustedGround ground = trusted_ground(project, store);
  const std::string pointer = "/python/interpreter";
  const std::string& configured = project.python_interpreter;
  std::filesystem::path exe;
  if (configured.empty()) {
    // The first python3 on PATH outside the project folder (the agent's
    // shell may have a .venv of the worktree first), then the system's.
    const char* env_path = std::getenv("PATH");
    for (const auto& dir : {trusted_search_path(env_path ? env_path : "", ground), std::string("/usr/bin")}) {
      std::stringstream in(dir);
      for (std::string entry; exe.empty() && std::getline(in, entry, ':');) {
        // The file too: a python3 outside that links into the project is skipped.
        const auto candidate = std::filesystem::path(entry) / "python3";
        // A PATH folder this user may not enter (root's PATH under runuser:
        // /root/.cargo/bin) is passed over, not an internal error.
        std::error_code unreadable;
        if (std::filesystem::is_regular_file(candidate, unreadable) && ground.admits(candidate) &&
            capture_output({candidate.string(), "-c", "import numpy"}, store.root, std::chrono::seconds(60))) {
          exe = candidate;
        }
      }
    }
    if (exe.empty()) {
      config_fail(project, pointer, "python.interpreter",
                  "no python3 outside the project folder imports numpy (PATH, then /usr/bin): install numpy (Debian: "
                  "python3-numpy) or set python.interpreter to an absolute interpreter outside the project folder");
    }
  } else if (std::filesystem::path(configured).is_relative() && configured.find('/') != std::string::npos) {
    // A committed wrapper, from the export; the worktree's copy (a .venv,
    // git-ignored) is never run as trusted code.
    exe = store.root / configured;
    if (!std::filesystem::exists(exe)) {
      config_fail(project, pointer, "python.interpreter",
                  fmt::format("the Python interpreter '{}' is not in the trusted ref's tree ({}): a relative interpreter "
                              "resolves into the worktree ({}), which the agent writes, and trusted commands (the gate's "
                              "reference and bench driver) never run one from there; name an absolute interpreter outside "
                              "the project folder (e.g. /usr/bin/python3, or a virtualenv made elsewhere), or commit the "
                              "interpreter's wrapper on the trusted ref",
                              configured, store.describe(), (project.dir / configured).lexically_normal().string()));
    }
  } else {
    exe = resolve_executable(configured);
    if (exe.empty() || !std::filesystem::exists(exe)) {
      config_fail(project, pointer, "python.interpreter",
                  fmt::format("the Python interpreter '{}' is not found ({})", configured,
                              std::filesystem::path(configured).is_absolute() ? "no such file" : "looked in PATH"));
    }
    if (ground.admits(exe) && ground.admits(std::filesystem::absolute(exe).parent_path().parent_path())) {
      exe = harness_python(project);  // outside the project: probed for numpy there, once per process
    }
  }
  // A virtualenv's interpreter is a link to the system's; its site-packages
  // are its prefix's: both must lie on trusted ground.
  const auto prefix = std::filesystem::absolute(exe).parent_path().parent_path();
  for (const auto& p : {std::filesystem::absolute(exe), prefix}) {
    if (!ground.admits(p)) {
      config_fail(project, pointer, "python.interpreter",
                  fmt::format("the Python interpreter {} lies in the project folder {}, which the agent writes: trusted "
                              "commands (the gate's reference and bench driver) never run an interpreter or import "
                              "packages from there; name an absolute interpreter outside the project folder (e.g. "
                              "/usr/bin/python3, or a virtualenv made elsewhere), or commit it on the trusted ref",
                              exe.string(), project.dir.string()));
    }
  }
  // The export's wrapper is probed here (harness_python probes the others).
  if (lexically_inside(exe, store.root)) {
    const auto ok = capture_output({exe.string(), "-c", "import numpy"}, store.root, std::chrono::seconds(60));
    if (!ok) {
      config_fail(project, pointer, "python.interpreter",
                  fmt::format("the trusted Python interpreter {} cannot import numpy, which harnesses and densefeed_harness "
                              "need: install numpy for it, or name another",
                              exe.string()));
    }
  }
  return exe;
}

std::vector<std::filesystem::path> trusted_python_path(const Project& project, const GateStore& store) {
  if (store.worktree) return project.python_path;
  std::vector<std::filesystem::path> out;
  for (std::size_t i = 0; i < project.python_path.size(); ++i) {
    const auto rel = project.python_path[i].lexically_relative(project.dir);
    const auto in_store = store.root / rel;
    std::error_code ec;
    if (!std::filesystem::is_directory(in_store, ec)) {
      config_fail(project, fmt::format("/python/path/{}", i), fmt::format("python.path[{}]", i),
                  fmt::format("'{}' is not a folder of the trusted ref's tree ({}): it exists only in the worktree "
                              "(git-ignored or uncommitted), which the agent writes, and trusted commands (the gate's "
                              "reference and bench driver) never import from there; commit it on the trusted ref, or "
                              "install the package into the trusted interpreter",
                              rel.generic_string(), store.describe()));
    }
    out.push_back(in_store);
  }
  return out;
}

std::filesystem::path require_trusted_program(const std::vector<std::string>& argv,
                                              const std::vector<std::filesystem::path>& exe_dirs, const TrustedGround& ground,
                                              const std::string& what, const std::filesystem::path& gate_file,
                                              const std::string& field) {
  if (argv.empty()) throw InputError(gate_file.string(), {}, field, what + " is empty");
  std::vector<std::filesystem::path> dirs;
  for (const auto& d : exe_dirs) {
    if (ground.admits(d)) dirs.push_back(d);
  }
  auto exe = resolve_executable(argv[0], dirs);
  if (!exe.empty() && argv[0].find('/') == std::string::npos && !ground.admits(exe)) exe.clear();  // PATH into the worktree
  if (exe.empty() || !std::filesystem::exists(exe)) {
    std::vector<std::string> looked;
    for (const auto& d : dirs) looked.push_back(d.string());
    throw InputError(gate_file.string(), {}, field,
                     fmt::format("{} runs '{}', which is not found on trusted ground (looked in {}, then in PATH outside the "
                                 "project folder): a trusted program is the trusted ref's, never the worktree's build of it; "
                                 "commit it on the trusted ref under the project's harness_path, or give the gate (or "
                                 "densefeed.yaml) a `build` that builds it, so that densefeed builds it from the trusted ref",
                                 what, argv[0], looked.empty() ? std::string("no folder") : fmt::format("{}", fmt::join(looked, ", "))));
  }
  if (!ground.admits(exe)) {
    throw InputError(gate_file.string(), {}, field,
                     fmt::format("{} runs {}, which lies in the project folder {} outside the trusted ref's export: the "
                                 "agent writes there, and trusted code never runs from there; name it bare so that it is "
                                 "found in the trusted ref's export or build",
                                 what, exe.string(), ground.project.string()));
  }
  return exe;
}

std::string trusted_search_path(const std::string& path, const TrustedGround& ground) {
  std::string out;
  std::stringstream in(path);
  for (std::string entry; std::getline(in, entry, ':');) {
    if (entry.empty() || std::filesystem::path(entry).is_relative() || !ground.admits(entry)) continue;
    out += (out.empty() ? "" : ":") + entry;
  }
  return out.empty() ? "/usr/local/bin:/usr/bin:/bin" : out;
}

}  // namespace densefeed
