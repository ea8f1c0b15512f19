#include "project_init.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "error.h"
#include "gate_lock.h"
#include "install_paths.h"
#include "process_runner.h"
#include "project.h"
#include "text_lines.h"

namespace densefeed {
namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}


}  // namespace

InitResult init_project(const std::filesystem::path& dir_in) {
  InitResult r;
  r.dir = std::filesystem::weakly_canonical(std::filesystem::absolute(dir_in));
  if (!std::filesystem::is_directory(r.dir)) {
    throw InputError("command line", {}, "DIR", fmt::format("'{}' is not a folder", r.dir.string()));
  }
  if (!capture_output({"git", "-C", r.dir.string(), "rev-parse", "--show-toplevel"}, r.dir)) {
    throw InputError(r.dir.string(), {}, "",
                     "not in a git repository: densefeed reads gates from a trusted git ref, so run 'git init' (or "
                     "clone your repository) first, then densefeed init");
  }
  // The trusted ref: main where it exists (or is the unborn branch checked
  // out), else the branch the repository is on.
  const auto branch = capture_output({"git", "-C", r.dir.string(), "symbolic-ref", "--quiet", "--short", "HEAD"}, r.dir);
  const bool has_main = capture_output({"git", "-C", r.dir.string(), "rev-parse", "--verify", "--quiet", "refs/heads/main"}, r.dir).has_value();
  r.trusted_ref = "main";
  if (!has_main && branch && !first_line(*branch).empty()) r.trusted_ref = first_line(*branch);

  const auto templates = data_dir() / "init";
  if (!std::filesystem::is_directory(templates)) {
    throw InfraError(fmt::format("{}: densefeed's init templates are missing (a broken install?)", templates.string()));
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(templates)) {
    if (e.is_regular_file()) files.push_back(std::filesystem::relative(e.path(), templates));
  }
  std::sort(files.begin(), files.end());
  std::vector<std::string> existing;
  for (const auto& rel : files) {
    if (std::filesystem::exists(r.dir / rel)) existing.push_back(rel.generic_string());
  }
  if (std::filesystem::exists(r.dir / "gates" / "gates.lock")) existing.push_back("gates/gates.lock");
  if (!existing.empty()) {
    throw InputError(r.dir.string(), {}, "",
                     fmt::format("not initialising: {} already exist{} here and densefeed init never overwrites anything "
                                 "(move {} away, or write densefeed.yaml by hand: schemas/project.schema.json)",
                                 fmt::join(existing, ", "), existing.size() == 1 ? "s" : "", existing.size() == 1 ? "it" : "them"));
  }
  for (const auto& rel : files) {
    std::string text = read_all(templates / rel);
    if (rel == kProjectFile) {
      const auto at = text.find("@TRUSTED_REF@");
      if (at != std::string::npos) text.replace(at, 13, r.trusted_ref);
    }
    std::filesystem::create_directories((r.dir / rel).parent_path());
    std::ofstream out(r.dir / rel, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw InfraError(fmt::format("{}: cannot write", (r.dir / rel).string()));
    r.written.push_back(rel.generic_string());
  }
  // The sample gate comes locked: it is densefeed's, reviewed here. A person
  // still commits it on the trusted ref before any run trusts it.
  const Project project = load_project(r.dir);
  write_lock(worktree_store(project), {});
  r.written.push_back(project.gates + "/gates.lock");
  return r;
}

}  // namespace densefeed
