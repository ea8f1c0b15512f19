#include "project.h"

#include <cstdlib>

#include <map>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "error.h"
#include "install_paths.h"
#include "process_runner.h"
#include "schema_validator.h"

namespace densefeed {
namespace {

std::filesystem::path git_top(const std::filesystem::path& dir) {
  const auto out = capture_output({"git", "-C", dir.string(), "rev-parse", "--show-toplevel"}, dir);
  if (!out || out->empty()) return {};
  return std::filesystem::path(out->substr(0, out->find('\n')));
}

// A path of densefeed.yaml that must stay inside the project: no absolute
// path, no "..", so a config cannot point densefeed at another tree.
std::string inside(const YamlDocument& doc, const std::string& pointer, const std::string& rel) {
  const std::filesystem::path p(rel);
  if (p.is_absolute() || rel.find("..") != std::string::npos) {
    doc.fail(pointer, fmt::format("expected a path inside the project folder (relative, without '..'), got '{}'", rel));
  }
  return p.lexically_normal().generic_string();
}

}  // namespace

Project load_project(const std::filesystem::path& dir_in) { return load_project_from(dir_in, {}); }

Project trusted_project(const Project& worktree, const std::filesystem::path& trusted_tree) {
  const auto file = trusted_tree / kProjectFile;
  if (!std::filesystem::is_regular_file(file)) return worktree;  // the trusted ref predates densefeed.yaml: its defaults and the worktree's
  Project t = load_project_from(worktree.dir, file);
  return t;
}

Project load_project_from(const std::filesystem::path& dir_in, const std::filesystem::path& file) {
  Project p;
  p.dir = std::filesystem::weakly_canonical(std::filesystem::absolute(dir_in));
  const auto config_file = file.empty() ? p.config_file() : file;
  if (!std::filesystem::is_regular_file(config_file)) {
    throw InputError(config_file.string(), {}, "",
                     fmt::format("no {} in {} (run 'densefeed init' there to create one)", kProjectFile, p.dir.string()));
  }
  p.config = load_yaml_file(config_file);
  if (p.config.value.is_null()) p.config.value = nlohmann::ordered_json::object();
  SchemaValidator(schema_path("project.schema.json")).validate(p.config);
  const auto& v = p.config.value;
  if (v.contains("gates")) p.gates = inside(p.config, "/gates", v["gates"].get<std::string>());
  if (v.contains("experiments")) p.experiments = inside(p.config, "/experiments", v["experiments"].get<std::string>());
  p.ledger = p.dir / inside(p.config, "/ledger", v.value("ledger", std::string(".densefeed/ledger.db")));
  p.trusted_ref = v.value("trusted_ref", p.trusted_ref);
  if (v.contains("ledger_key")) {
    std::string key = v["ledger_key"].get<std::string>();
    if (key.rfind("~/", 0) == 0) {
      const char* home = std::getenv("HOME");
      key = std::string(home ? home : "") + key.substr(1);
    }
    p.ledger_key = std::filesystem::weakly_canonical(p.dir / key);
    const auto folder = std::filesystem::weakly_canonical(p.ledger.parent_path());
    const auto rel = p.ledger_key.lexically_relative(folder);
    if (!rel.empty() && *rel.begin() != "..") {
      p.config.fail("/ledger_key", fmt::format("{} is inside the ledger's folder {}: anyone who can edit the ledger could "
                                               "then re-seal it; keep the key elsewhere (default ~/.config/densefeed/keys/)",
                                               p.ledger_key.string(), folder.string()));
    }
    // Nor in the project folder: the agent's worktree (README: a key lies
    // outside the ledger's folder and the project folder).
    const auto in_project = p.ledger_key.lexically_relative(p.dir);
    if (!in_project.empty() && *in_project.begin() != "..") {
      p.config.fail("/ledger_key", fmt::format("{} is inside the project folder {}, which the agent can write: keep the key "
                                               "outside it (default ~/.config/densefeed/keys/)",
                                               p.ledger_key.string(), p.dir.string()));
    }
  }
  if (v.contains("python")) {
    const auto& py = v["python"];
    p.python_interpreter = py.value("interpreter", "");
    if (py.contains("path")) {
      for (std::size_t i = 0; i < py["path"].size(); ++i) {
        p.python_path.push_back(p.dir / inside(p.config, fmt::format("/python/path/{}", i), py["path"][i].get<std::string>()));
      }
    }
  }
  if (v.contains("harness_path")) {
    for (std::size_t i = 0; i < v["harness_path"].size(); ++i) {
      p.harness_path.push_back(inside(p.config, fmt::format("/harness_path/{}", i), v["harness_path"][i].get<std::string>()));
    }
  }
  if (v.contains("service")) p.service = v["service"].get<std::string>();
  p.require_service = v.value("require_service", false);
  if (v.contains("sandbox") && v["sandbox"].contains("env")) {
    p.sandbox_env = v["sandbox"]["env"].get<std::vector<std::string>>();
  }
  if (v.contains("resources")) {
    p.resources = read_resources(v["resources"]);
  }
  if (v.contains("build")) {
    BuildSpec b;
    for (const auto& c : v["build"]["commands"]) b.commands.push_back(c.get<std::vector<std::string>>());
    b.bin = v["build"].value("bin", b.bin);
    b.timeout_s = v["build"].value("timeout_s", b.timeout_s);
    p.build = b;
  }
  p.repo_top = git_top(p.dir);
  if (!p.repo_top.empty()) {
    p.repo_top = std::filesystem::weakly_canonical(p.repo_top);
    const auto rel = std::filesystem::relative(p.dir, p.repo_top).generic_string();
    p.prefix = rel == "." || rel.empty() ? "" : rel + "/";
  }
  return p;
}

Project find_project(const std::filesystem::path& start, const std::filesystem::path& explicit_dir) {
  if (!explicit_dir.empty()) {
    if (!std::filesystem::is_directory(explicit_dir)) {
      throw InputError("command line", {}, "--project", fmt::format("'{}' is not a folder", explicit_dir.string()));
    }
    return load_project(explicit_dir);
  }
  std::vector<std::string> searched;
  for (auto dir = std::filesystem::weakly_canonical(std::filesystem::absolute(start));; dir = dir.parent_path()) {
    searched.push_back(dir.string());
    if (std::filesystem::is_regular_file(dir / kProjectFile)) return load_project(dir);
    if (dir == dir.parent_path()) break;
  }
  throw InputError(std::string(kProjectFile), {}, "",
                   fmt::format("no {} in {} or any folder above it (searched {}); run 'densefeed init' at the top of "
                               "your repository to create one, or pass --project DIR",
                               kProjectFile, start.string(), fmt::join(searched, ", ")));
}

std::filesystem::path harness_python(const Project& project) {
  static std::mutex mutex;
  static std::map<std::string, std::filesystem::path> found;  // configured name -> resolved interpreter
  std::lock_guard lock(mutex);
  const std::string key = project.dir.string() + "\n" + project.python_interpreter;
  if (auto it = found.find(key); it != found.end()) return it->second;
  const auto imports_numpy = [&](const std::filesystem::path& exe) {
    return capture_output({exe.string(), "-c", "import numpy"}, project.dir, std::chrono::seconds(60)).has_value();
  };
  // An interpreter in the project folder (a .venv) is the agent's program:
  // never started here, outside any sandbox, to probe it. A candidate that
  // cannot import numpy fails in its own sandbox instead.
  const auto inside_project = [&](const std::filesystem::path& p) {
    const auto in = [&](const std::filesystem::path& q) {
      const auto rel = q.lexically_normal().lexically_relative(project.dir);
      return !rel.empty() && *rel.begin() != "..";
    };
    const auto absolute = std::filesystem::absolute(p);
    return in(absolute) || in(std::filesystem::weakly_canonical(absolute));
  };
  std::vector<std::filesystem::path> tried;
  if (!project.python_interpreter.empty()) {
    std::filesystem::path exe = project.python_interpreter;
    if (exe.is_relative() && project.python_interpreter.find('/') != std::string::npos) exe = project.dir / exe;
    const auto resolved = resolve_executable(exe.string());
    const std::string pointer = "/python/interpreter";
    if (resolved.empty() || !std::filesystem::exists(resolved)) {
      const bool in_folder = std::filesystem::path(project.python_interpreter).is_relative() &&
                             project.python_interpreter.find('/') != std::string::npos;
      project.config.fail(
          pointer,
          in_folder ? fmt::format("the Python interpreter '{}' resolves against the project folder to {}, which does not exist: "
                                  "make it (python3 -m venv {} && {}/bin/pip install numpy), or name an interpreter outside "
                                  "the project (e.g. /usr/bin/python3 or /opt/venvs/team/bin/python), which a gate's Python "
                                  "reference or driver needs anyway",
                                  project.python_interpreter, exe.lexically_normal().string(),
                                  exe.parent_path().parent_path().lexically_relative(project.dir).string(),
                                  exe.parent_path().parent_path().lexically_relative(project.dir).string())
                    : fmt::format("the Python interpreter '{}' is not found ({})", project.python_interpreter,
                                  exe.is_absolute() ? "no such file" : "looked in PATH: " + std::string(std::getenv("PATH") ? std::getenv("PATH") : "")));
    }
    if (!inside_project(resolved) && !imports_numpy(resolved)) {
      project.config.fail(pointer, fmt::format("the Python interpreter '{}' ({}) cannot import numpy, which harnesses "
                                               "and densefeed_harness need: install numpy for it, or name another",
                                               project.python_interpreter, resolved.string()));
    }
    return found[key] = resolved;
  }
  for (const auto& candidate : {resolve_executable("python3"), std::filesystem::path("/usr/bin/python3")}) {
    std::error_code unreadable;  // a PATH folder this user may not enter is passed over
    if (candidate.empty() || !std::filesystem::exists(candidate, unreadable)) continue;
    tried.push_back(candidate);
    if (inside_project(candidate) || imports_numpy(candidate)) return found[key] = candidate;
  }
  std::vector<std::string> names;
  for (const auto& t : tried) names.push_back(t.string());
  throw InputError(project.config_file().string(), {}, "python.interpreter",
                   fmt::format("no Python interpreter that imports numpy (tried: {}); install numpy (Debian: python3-numpy) "
                               "or set python.interpreter in {}",
                               names.empty() ? std::string("none found") : fmt::format("{}", fmt::join(names, ", ")), kProjectFile));
}

}  // namespace densefeed
