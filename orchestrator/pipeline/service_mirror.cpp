#include "service_mirror.h"

#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "error.h"
#include "text_lines.h"
#include "tool_run.h"
#include "project.h"
#include "yaml_document.h"

namespace densefeed {

namespace {

// Runs git or tar on the clone or a scratch folder: the repository may
// belong to another user (the agents' team); nothing of its own
// configuration is run by a fetch from it.
ToolResult run_git(const ServiceConfig& config, const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                   std::map<std::string, std::string> env = {}, std::uint64_t fsize_limit = 0) {
  for (auto& [k, v] : git_foreign_repository_env()) env.emplace(k, v);
  // git clears GIT_CONFIG_COUNT for the upload-pack of a local clone or
  // fetch (local_repo_env), which then refuses a repository of another
  // user: safe.directory also comes from a global configuration of the
  // service's own, in its state folder, and no system one is read.
  env["GIT_CONFIG_GLOBAL"] = (config.state / "gitconfig").string();
  env["GIT_CONFIG_NOSYSTEM"] = "1";
  return run_tool(argv, cwd, env, fsize_limit);
}


// The most members a worktree snapshot may hold.
constexpr std::size_t kMaxSnapshotMembers = 100000;

// Refuses, before tar reads it, an archive whose extraction could hold more
// than the archive itself: only an uncompressed POSIX or GNU tar (GNU tar
// would otherwise inflate a gzip on its own: a hostile trial's 1 MB upload
// became 1 GB on the service's disk), no sparse member (GNU 'S' or PAX
// GNU.sparse), no device, FIFO or contiguous member, at most
// kMaxSnapshotMembers members. Every member's bytes are then in the archive,
// which the wire already bounds (snapshot_limit_mb). Layout: POSIX.1-2001
// ustar headers of 512 bytes (size at 124, octal; typeflag at 156; magic
// "ustar" at 257), data padded to 512.
void check_snapshot_archive(const std::string& tar) {
  const auto refuse = [](const std::string& why) { throw InputError("", {}, "snapshot", "the worktree snapshot " + why); };
  if (tar.size() < 512 || tar.compare(257, 5, "ustar") != 0) refuse("is not an uncompressed tar archive (what densefeed's client sends)");
  std::size_t at = 0, members = 0;
  while (at + 512 <= tar.size()) {
    const std::string_view block(tar.data() + at, 512);
    if (block.find_first_not_of('\0') == std::string_view::npos) break;  // the end
    if (block.compare(257, 5, "ustar") != 0) refuse(fmt::format("has a member header at byte {} that is not a tar header", at));
    if (static_cast<unsigned char>(block[124]) & 0x80) refuse("has a member too large for an octal size field");
    std::uint64_t size = 0;
    for (std::size_t i = 124; i < 136 && block[i] >= '0' && block[i] <= '7'; ++i) size = size * 8 + static_cast<std::uint64_t>(block[i] - '0');
    const char type = block[156];
    const std::size_t data = at + 512;
    if (type == 'S') refuse("has a sparse member");
    if ((type == 'x' || type == 'g') && std::string_view(tar).substr(data, std::min<std::uint64_t>(size, tar.size() - std::min(data, tar.size()))).find("GNU.sparse") != std::string_view::npos) {
      refuse("has a sparse member");
    }
    if (type == '3' || type == '4' || type == '6' || type == '7') refuse("has a member that is not a file, a folder or a link");
    if (type != 'x' && type != 'g' && type != 'L' && type != 'K' && ++members > kMaxSnapshotMembers) {
      refuse(fmt::format("has more than {} members", kMaxSnapshotMembers));
    }
    at = data + (size + 511) / 512 * 512;
  }
}

}  // namespace

ServiceMirror::ServiceMirror(ServiceConfig config) : config_(std::move(config)) {}

void ServiceMirror::refresh() {
  std::lock_guard lock(git_);
  const auto repo = config_.mirror();
  const auto git = [&](std::vector<std::string> args, const std::string& step) {
    args.insert(args.begin(), {"git", "-C", repo.string()});
    const auto r = run_git(config_, args, config_.state);
    if (!r.ok) throw InfraError(fmt::format("densefeed service: {} failed: {}", step, first_line(r.what())));
    return r.out;
  };
  {
    std::ofstream gitconfig(config_.state / "gitconfig", std::ios::trunc);
    gitconfig << "# written by densefeed serve: the repository it fetches from belongs to another user\n[safe]\n\tdirectory = *\n";
    if (!gitconfig) throw InfraError("cannot write " + (config_.state / "gitconfig").string());
  }
  if (!std::filesystem::exists(repo / ".git")) {
    std::filesystem::remove_all(repo);
    const auto r = run_git(config_, {"git", "clone", "-q", "--no-checkout", "--", config_.repository.string(), repo.string()}, config_.state);
    if (!r.ok) throw InfraError(fmt::format("densefeed service: git clone of {} failed: {}", config_.repository.string(), first_line(r.what())));
  }
  // Tags go to a namespace of their own, never refs/tags: git resolves a
  // name to refs/tags/NAME before refs/heads/NAME, so a tag an agent pushed
  // named like the trusted ref would otherwise become it (a hostile trial
  // pushed a tag `main` with loosened gates and got a float16 merge green).
  // --no-tags: nothing else lands in refs/tags either, and any tag left
  // there by an older clone is deleted below.
  git({"fetch", "-q", "--prune", "--force", "--no-tags", "origin", "+refs/heads/*:refs/remotes/origin/*",
       "+refs/tags/*:refs/densefeed/tags/*"},
      fmt::format("git fetch from {}", config_.repository.string()));
  for (const auto& line : nonempty_lines(git({"for-each-ref", "--format=%(refname)", "refs/tags/"}, "listing the clone's tags"))) {
    git({"update-ref", "-d", line}, "deleting a tag outside refs/densefeed/tags");
  }
  const std::string trusted = "refs/remotes/origin/" + config_.trusted_ref;
  const auto sha = first_line(git({"rev-parse", "--verify", "-q", trusted + "^{commit}"},
                                  fmt::format("finding the trusted ref '{}' in {}", config_.trusted_ref, config_.repository.string())));
  git({"update-ref", "refs/heads/" + config_.trusted_ref, sha}, "moving the trusted branch");
  git({"checkout", "-q", "-f", "--detach", sha}, "checking out the trusted ref");
  git({"clean", "-q", "-f", "-d"}, "cleaning the clone's checkout");
  // The project's configuration at the trusted ref must agree on which ref is trusted.
  const Project p = load_project(config_.project_dir());
  if (p.trusted_ref != config_.trusted_ref) {
    throw InputError(config_.file.string(), {}, "trusted_ref",
                     fmt::format("the service trusts '{}' but the project's densefeed.yaml at that ref names trusted_ref '{}': make them one",
                                 config_.trusted_ref, p.trusted_ref));
  }
}

std::string ServiceMirror::resolve(const std::string& revision, const std::string& agent_head, const std::string& file,
                                   const std::string& field) {
  std::lock_guard lock(git_);
  std::vector<std::string> candidates;
  static const std::regex head_form("^HEAD([~^][0-9~^]*)?$");
  if (std::regex_match(revision, head_form)) {
    if (agent_head.empty()) {
      throw InputError(file, {}, field, fmt::format("'{}' is relative to your checkout's HEAD, which the service was not told: name a branch or commit", revision));
    }
    candidates.push_back(agent_head + revision.substr(4));
  } else if (!revision.empty() && revision.front() != '-') {
    candidates = {"refs/remotes/origin/" + revision, "refs/densefeed/tags/" + revision};
    // A commit named by its sha (or a prefix of one); never a ref of the clone's own.
    if (std::regex_match(revision, std::regex("^[0-9a-f]{4,40}$"))) candidates.push_back(revision);
  }
  for (const auto& c : candidates) {
    const auto r = run_git(config_, {"git", "-C", config_.mirror().string(), "rev-parse", "--verify", "-q", "--end-of-options", c + "^{commit}"},
                            config_.state);
    if (r.ok) return first_line(r.out);
  }
  throw InputError(file, {}, field,
                   fmt::format("revision '{}' names no commit of {} (the service fetches from there: push your branch, then submit)",
                               revision, config_.repository.string()));
}

std::string ServiceMirror::commit_snapshot(const WireSnapshot& snapshot, const std::filesystem::path& work, const std::string& who) {
  check_snapshot_archive(snapshot.tar);
  const auto tree = work / "tree";
  std::filesystem::create_directories(tree);
  {
    std::ofstream out(work / "snapshot.tar", std::ios::binary);
    out.write(snapshot.tar.data(), static_cast<std::streamsize>(snapshot.tar.size()));
    if (!out) throw InfraError("cannot write the snapshot to " + work.string());
  }
  // GNU tar's defaults refuse absolute names and '..', and extract links
  // that point out of the folder as placeholders; no owner or mode is kept.
  const auto x = run_git(config_, {"tar", "-x", "-f", (work / "snapshot.tar").string(), "-C", tree.string(), "--no-same-owner",
                           "--no-same-permissions", "--no-overwrite-dir"},
                          work, {}, config_.snapshot_limit_bytes * 2);
  if (!x.ok) throw InputError("", {}, "snapshot", "the worktree snapshot is not a tar archive tar accepts: " + first_line(x.what()));
  // A worktree holds files, folders and symbolic links; anything else
  // (device files, FIFOs, sockets) a tar member could make is refused.
  for (auto it = std::filesystem::recursive_directory_iterator(tree); it != std::filesystem::recursive_directory_iterator(); ++it) {
    const auto type = it->symlink_status().type();
    if (type != std::filesystem::file_type::regular && type != std::filesystem::file_type::directory &&
        type != std::filesystem::file_type::symlink) {
      throw InputError("", {}, "snapshot",
                       fmt::format("the worktree snapshot holds '{}', which is not a file, a folder or a symbolic link",
                                   std::filesystem::relative(it->path(), tree).string()));
    }
  }
  std::lock_guard lock(git_);
  const std::string git_dir = (config_.mirror() / ".git").string();
  const std::map<std::string, std::string> env = {{"GIT_DIR", git_dir},
                                                  {"GIT_WORK_TREE", tree.string()},
                                                  {"GIT_INDEX_FILE", (work / "index").string()},
                                                  {"GIT_AUTHOR_NAME", who},
                                                  {"GIT_AUTHOR_EMAIL", "agent@densefeed.service"},
                                                  {"GIT_COMMITTER_NAME", "densefeed service"},
                                                  {"GIT_COMMITTER_EMAIL", "service@densefeed.service"}};
  const auto step = [&](std::vector<std::string> args, const std::string& what) {
    args.insert(args.begin(), "git");
    const auto r = run_git(config_, args, tree, env);
    if (!r.ok) throw InfraError(fmt::format("densefeed service: {} of a snapshot failed: {}", what, first_line(r.what())));
    return first_line(r.out);
  };
  step({"add", "-A", "-f", "."}, "git add");
  const auto tree_sha = step({"write-tree"}, "git write-tree");
  std::string parent = step({"rev-parse", "--verify", "-q", "refs/heads/" + config_.trusted_ref + "^{commit}"}, "finding the trusted ref");
  if (!snapshot.head.empty() && std::regex_match(snapshot.head, std::regex("^[0-9a-f]{40}$")) &&
      run_git(config_, {"git", "cat-file", "-e", snapshot.head + "^{commit}"}, tree, env).ok) {
    parent = snapshot.head;
  }
  const auto commit = step({"commit-tree", tree_sha, "-p", parent, "-m",
                            fmt::format("densefeed: snapshot of {}'s worktree (sha256 {}, {} bytes)", who, snapshot.sha256, snapshot.tar.size())},
                           "git commit-tree");
  step({"update-ref", "refs/densefeed/snapshots/" + commit, commit}, "git update-ref");
  return commit;
}

namespace {

// Where the scalar at `mark` (1-based line and column) starts and ends in `text`.
std::pair<std::size_t, std::size_t> scalar_span(const std::string& text, SourceMark mark) {
  std::size_t at = 0;
  for (int line = 1; line < mark.line && at != std::string::npos; ++line) {
    at = text.find('\n', at);
    if (at != std::string::npos) ++at;
  }
  if (at == std::string::npos) return {std::string::npos, 0};
  at += static_cast<std::size_t>(mark.column - 1);
  if (at >= text.size()) return {std::string::npos, 0};
  const char q = text[at];
  if (q == '"' || q == '\'') {
    std::size_t end = at + 1;
    while (end < text.size() && text[end] != q) end += (q == '"' && text[end] == '\\') ? 2 : 1;
    return {at, std::min(end + 1, text.size()) - at};
  }
  std::size_t end = at;
  while (end < text.size() && text[end] != '\n' && text[end] != ',' && text[end] != '}' && text[end] != ']' &&
         !(text[end] == '#' && end > at && text[end - 1] == ' ')) {
    ++end;
  }
  while (end > at && (text[end - 1] == ' ' || text[end - 1] == '\t')) --end;
  return {at, end - at};
}

}  // namespace

std::string ServiceMirror::pin_manifest(const std::string& text, const std::string& path, const std::string& snapshot_commit,
                                        const std::string& agent_head) {
  const YamlDocument doc = parse_yaml(text, path);
  struct Pin {
    std::size_t at, length;
    std::string sha;
  };
  std::vector<Pin> pins;
  std::map<std::string, std::string> shas;  // arm -> the commit pinned
  for (const char* arm : {"candidate", "base"}) {
    const std::string pointer = fmt::format("/{}/revision", arm);
    const auto& v = doc.value;
    if (!v.is_object() || !v.contains(arm) || !v[arm].is_object() || !v[arm].contains("revision") || !v[arm]["revision"].is_string()) {
      doc.fail(pointer, "expected the arm's revision (a branch, tag or commit of the repository; WORKTREE for the candidate)");
    }
    const std::string rev = v[arm]["revision"].get<std::string>();
    std::string sha;
    if (rev == "WORKTREE") {
      if (std::string(arm) == "base") {
        doc.fail(pointer, "expected a commit the service fetches (e.g. the trusted branch): a base from your worktree is not served");
      }
      if (snapshot_commit.empty()) doc.fail(pointer, "WORKTREE needs a snapshot of your worktree, which this request did not carry");
      sha = snapshot_commit;
    } else {
      sha = resolve(rev, agent_head, path, pointer_to_field(pointer));
    }
    const auto [at, length] = scalar_span(text, doc.mark_of(pointer));
    if (at == std::string::npos) doc.fail(pointer, "expected the revision as a scalar on one line");
    pins.push_back({at, length, sha});
    shas[arm] = sha;
  }
  std::string out = text;
  std::sort(pins.begin(), pins.end(), [](const Pin& a, const Pin& b) { return a.at > b.at; });
  for (const auto& p : pins) out.replace(p.at, p.length, p.sha);
  // What is queued must say what was checked: the pinned text, parsed again,
  // names exactly the pinned commits. An anchor and alias (a hostile trial:
  // `base: {revision: *r}` whose anchor the pin overwrote, so that *r then
  // meant another anchor, WORKTREE) or any other form whose text is not the
  // value is refused, never queued.
  const YamlDocument pinned = parse_yaml(out, path);
  for (const auto& [arm, sha] : shas) {
    const auto& v = pinned.value;
    if (!v.contains(arm) || !v[arm].is_object() || !v[arm].contains("revision") || !v[arm]["revision"].is_string() ||
        v[arm]["revision"].get<std::string>() != sha) {
      doc.fail(fmt::format("/{}/revision", arm), "expected the revision written out as a plain value: anchors, aliases and tags are not "
                                                  "served (the service pins it to a commit in the text it queues)");
    }
  }
  return out;
}

}  // namespace densefeed
