#include "install_paths.h"

#include <system_error>

#include <fmt/format.h>

#include "error.h"

namespace densefeed {

namespace {

// A missing data folder means a broken build or install, never bad input.
void require(bool ok, const std::filesystem::path& path, std::string_view what) {
  if (ok) return;
  throw InfraError(fmt::format("densefeed's installed data is incomplete: {} {} does not exist (reinstall densefeed, "
                               "or rebuild: the build folder holds it as share/densefeed next to bin/)",
                               what, path.string()));
}

bool is_dir(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_directory(p, ec);
}

bool is_file(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec);
}

}  // namespace

std::filesystem::path running_executable() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  // Unlike self_dir(), no fallback to the working directory: data found
  // relative to wherever densefeed was started from would be a guess.
  if (ec) throw InfraError(fmt::format("cannot read /proc/self/exe to find densefeed's data: {}", ec.message()));
  return exe;
}

std::filesystem::path data_dir_of(const std::filesystem::path& executable) {
  const auto dir = (executable.parent_path() / ".." / "share" / "densefeed").lexically_normal();
  require(is_dir(dir), dir, "the data folder");
  return dir;
}

std::filesystem::path data_dir() { return data_dir_of(running_executable()); }

std::filesystem::path schemas_dir() {
  auto dir = data_dir() / "schemas";
  require(is_dir(dir), dir, "the JSON Schema folder");
  return dir;
}

std::filesystem::path schema_path(std::string_view name) {
  const std::filesystem::path file(name);
  if (name.empty() || file.filename() != file || file == "." || file == "..") {
    throw InfraError(fmt::format("schema name '{}' is not a bare file name", name));
  }
  auto path = schemas_dir() / file;
  require(is_file(path), path, "the JSON Schema");
  return path;
}

std::filesystem::path skill_dir() {
  auto dir = data_dir() / "skills" / "densefeed-optimization-loop";
  require(is_file(dir / "SKILL.md"), dir / "SKILL.md", "the agent skill");
  return dir;
}

std::filesystem::path python_module_dir() {
  auto dir = data_dir() / "python";
  require(is_file(dir / "densefeed_harness.py"), dir / "densefeed_harness.py", "the Python harness module");
  return dir;
}

}  // namespace densefeed
