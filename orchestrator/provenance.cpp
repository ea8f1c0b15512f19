#include "provenance.h"

#include <sstream>

#include <fmt/format.h>

#include "process_runner.h"
#include "sha256.h"

namespace densefeed {

Provenance read_provenance(const std::filesystem::path& root, const GateSpec& gate) {
  Provenance p;
  p.root = root.string();
  const auto head = capture_output({"git", "-C", root.string(), "rev-parse", "--verify", "HEAD"}, root);
  if (!head) {
    p.uncommitted.push_back("not a git checkout");
  } else {
    p.commit = head->substr(0, head->find('\n'));
    std::vector<std::string> argv = {"git", "-C", root.string(), "status", "--porcelain", "--untracked-files=all", "--",
                                     "gates/" + gate.name + ".yaml", "gates/gates.lock"};
    argv.insert(argv.end(), gate.freezes.begin(), gate.freezes.end());
    if (const auto status = capture_output(argv, root)) {
      std::istringstream lines(*status);
      for (std::string line; std::getline(lines, line);) {
        if (line.size() > 3) p.uncommitted.push_back(line.substr(3) + " (" + line.substr(0, 2) + ")");
      }
    } else {
      p.uncommitted.push_back("git status failed");
    }
  }
  // WORKTREE arms run the harnesses as last built next to densefeed: say so
  // when they come from another checkout, or when this one has changes they
  // may not include.
  const std::filesystem::path built_from = DENSEFEED_SOURCE_DIR;
  std::error_code ec;
  if (!std::filesystem::equivalent(built_from, root, ec)) {
    p.uncommitted.push_back(fmt::format("the harnesses next to densefeed were built from {}, not from this root",
                                        built_from.string()));
  }
  if (!p.commit.empty()) {
    if (const auto status = capture_output({"git", "-C", root.string(), "status", "--porcelain", "--untracked-files=no"}, root);
        status && !status->empty()) {
      p.uncommitted.push_back("the checkout has uncommitted changes: WORKTREE runs the harnesses as last built, which may not include them");
    }
  }
  for (const auto* command : {&gate.reference_command, &gate.candidate_command}) {
    if (command->empty()) continue;
    const auto exe = resolve_executable(command->front());
    if (exe.empty() || p.harness_sha256.count(exe.string())) continue;
    try {
      p.harness_sha256[exe.string()] = sha256_file(exe);
    } catch (const std::exception&) {
      p.harness_sha256[exe.string()] = "unreadable";
    }
  }
  return p;
}

nlohmann::ordered_json provenance_json(const Provenance& p) {
  return {{"root", p.root}, {"commit", p.commit}, {"clean", p.clean()}, {"uncommitted", p.uncommitted},
          {"harness_sha256", p.harness_sha256}};
}

}  // namespace densefeed
