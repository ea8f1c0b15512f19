#include "revision_build.h"

#include <unistd.h>

#include <chrono>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "build_seal.h"
#include "command_template.h"
#include "error.h"
#include "ledger_identity.h"
#include "ledger_key.h"
#include "process_runner.h"
#include "revision.h"
#include "sha256.h"
#include "executor.h"
#include "untrusted_launch.h"

namespace densefeed {

RevisionBuild build_revision(const GateSpec& gate, const Project& project, const std::string& sha, const Workspace& workspace,
                             bool sandbox, Executor* executor) {
  const auto builds_dir = workspace.builds();
  // The ledger's key seals builds; a workspace whose ledger has no key yet
  // seals nothing, and so reuses nothing.
  std::string key;
  try {
    key = find_ledger_key(workspace.ledger, ledger_key_fingerprint(workspace.ledger), false).bytes;
  } catch (const std::exception&) {
  }
  const auto start = std::chrono::steady_clock::now();
  RevisionBuild b;
  b.sha = sha;
  const BuildSpec spec = gate.build ? *gate.build : project.build ? *project.build : BuildSpec{{}, "", kDefaultBuildTimeoutS};
  const std::string spec_hash =
      sha256_hex(nlohmann::json({project.prefix, spec.commands, spec.bin}).dump()).substr(0, 12);
  const auto dir = builds_dir / (sha + "-" + spec_hash);
  b.src = dir / "src";
  b.build = dir / "build";
  TemplateValues values;
  values.src = b.src.string();
  values.build = b.build.string();
  if (spec.commands.empty()) b.build.clear();  // nothing is built: the export is the build
  else b.bin = render_command({spec.bin}, values)[0];
  const auto marker = dir / "built";
  std::error_code ec;
  if (std::filesystem::exists(marker) && !key.empty()) {
    auto altered = check_build_seal(dir, key, sha);
    if (!altered) {
      b.ok = b.cached = true;
      b.sandbox = {SandboxMode::off, "cached"};
      return b;
    }
    b.tampered.push_back(std::move(*altered));
    // Moved aside first (a rename needs only the builds folder writable), then removed.
    const auto aside = builds_dir / fmt::format(".{}.tampered.{}", dir.filename().string(), ::getpid());
    std::filesystem::remove_all(aside, ec);
    std::filesystem::rename(dir, aside, ec);
    if (ec) throw InfraError(fmt::format("{}: an altered cached build cannot be moved aside: {}", dir.string(), ec.message()));
    std::filesystem::remove_all(aside, ec);
  }
  b.sandbox = require_sandbox(sandbox);

  std::filesystem::remove_all(dir, ec);
  std::filesystem::create_directories(dir / "build", ec);
  if (ec) throw InfraError(fmt::format("{}: cannot create the build folder: {}", (dir / "build").string(), ec.message()));
  try {
    export_revision(project.in_git() ? project.repo_top : project.dir, project.prefix, sha, b.src);
  } catch (const std::runtime_error& e) {
    b.failure = e.what();
    return b;
  }
  for (std::size_t i = 0; i < spec.commands.size(); ++i) {
    UntrustedCommand p;
    p.argv = render_command(spec.commands[i], values);
    p.cwd = b.src;
    p.writable = {dir};
    p.stdout_path = dir / fmt::format("build-{}.out.log", i);
    p.stderr_path = dir / fmt::format("build-{}.err.log", i);
    p.timeout = std::chrono::milliseconds(static_cast<long long>(spec.timeout_s * 1000));
    p.limits = gate.limits;
    p.sandbox = sandbox;
    // A build sees the system and its own folder: no project, no workspace.
    Launch launch;
    launch.untrusted = p;
    AllocationRequest request;
    request.name = fmt::format("build-{}", i + 1);
    request.stage = "build";
    request.resources = layered(project.resources, gate.resources).for_stage("build");
    request.time_limit = std::chrono::duration_cast<std::chrono::seconds>(p.timeout + std::chrono::milliseconds(999));
    const LaunchResult ran = run_launch(given_or_local(executor), launch, request);
    const UntrustedResult& r = ran.result;
    if (!ran.infrastructure.empty()) {
      b.failure = fmt::format("build command {} ({}) did not run to an end of its own: {}", i + 1, fmt::join(p.argv, " "),
                              ran.infrastructure);
      b.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return b;
    }
    if (!r.ok()) {
      const LogTail tail = log_tail(p.stdout_path, p.stderr_path, 8);
      b.failure = fmt::format("build command {} ({}) {}; log {}: {}", i + 1, fmt::join(p.argv, " "), r.describe(),
                              (tail.stream == "stdout" ? p.stdout_path : p.stderr_path).string(), tail.text);
      b.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return b;
    }
  }
  if (!key.empty()) write_build_seal(dir, key);
  std::ofstream(marker) << sha << "\n";
  b.ok = true;
  b.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return b;
}

}  // namespace densefeed
