#include "shown_tree.h"

#include <algorithm>
#include <set>
#include <string>

#include "workspace.h"

namespace densefeed {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A -runs folder of some ledger: it holds a folder named by an experiment id.
bool holds_run_folders(const std::filesystem::path& dir) {
  std::error_code ec;
  std::size_t looked = 0;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end && looked < 64; it.increment(ec), ++looked) {
    std::error_code tec;
    if (all_digits(it->path().filename().string()) && it->is_directory(tec)) return true;
  }
  return false;
}

}  // namespace

ShownTree scan_shown_tree(const std::vector<std::filesystem::path>& roots, const std::vector<std::filesystem::path>& skip) {
  ShownTree tree;
  std::set<std::filesystem::path> skipped;
  for (const auto& s : skip) skipped.insert(std::filesystem::absolute(s).lexically_normal());
  std::set<std::filesystem::path> hidden;
  const auto hide = [&](const std::filesystem::path& p) {
    if (hidden.insert(p).second) tree.hidden.push_back(p);
  };
  std::set<std::filesystem::path> walked;
  for (const auto& root_in : roots) {
    const auto root = std::filesystem::absolute(root_in).lexically_normal();
    std::error_code ec;
    if (!std::filesystem::is_directory(std::filesystem::symlink_status(root, ec)) || !walked.insert(root).second) continue;
    std::filesystem::recursive_directory_iterator it(root, std::filesystem::directory_options::skip_permission_denied, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      ++tree.entries;
      const auto& path = it->path();
      std::error_code tec;
      const auto type = it->symlink_status(tec).type();
      if (tec) continue;
      const std::string name = path.filename().string();
      if (type == std::filesystem::file_type::socket) {
        tree.sockets.push_back(path);
      } else if (type == std::filesystem::file_type::regular) {
        if (ends_with(name, ".db")) {
          const Workspace w{path};
          for (const auto& p : {w.runs(), w.builds(), w.exports(), w.calibrations(), w.caches()}) {
            if (std::filesystem::is_directory(std::filesystem::symlink_status(p, tec))) hide(p);
          }
          hide(path);
        } else if (ends_with(name, ".db-wal") || ends_with(name, ".db-shm") || ends_with(name, ".db-journal")) {
          hide(path);
        }
      } else if (type == std::filesystem::file_type::directory) {
        const auto normal = path.lexically_normal();
        if (skipped.count(normal) || hidden.count(normal)) {
          it.disable_recursion_pending();
        } else if (ends_with(name, "-exports") || ends_with(name, "-caches") || (ends_with(name, "-runs") && holds_run_folders(path))) {
          hide(normal);
          it.disable_recursion_pending();
          // Its ledger, whatever it is named (--ledger ci/results.sqlite
          // makes ci/results-runs): the files beside it named STEM.* (and
          // their -wal, -shm, -journal).
          const std::string stem = name.substr(0, name.rfind('-'));
          std::error_code dec;
          for (std::filesystem::directory_iterator d(path.parent_path(), dec), dend; !dec && d != dend; d.increment(dec)) {
            const std::string sibling = d->path().filename().string();
            std::error_code sec;
            if (sibling.size() > stem.size() + 1 && sibling.compare(0, stem.size() + 1, stem + ".") == 0 &&
                d->symlink_status(sec).type() == std::filesystem::file_type::regular) {
              hide(d->path().lexically_normal());
            }
          }
        }
      }
    }
  }
  // A ledger's folders may be found before the ledger names them: nothing
  // below a hidden folder is listed twice.
  std::vector<std::filesystem::path> kept;
  for (const auto& p : tree.hidden) {
    bool below = false;
    for (const auto& q : tree.hidden) {
      const auto a = p.string(), d = q.string();
      below = below || (a.size() > d.size() && a.compare(0, d.size(), d) == 0 && a[d.size()] == '/');
    }
    if (!below) kept.push_back(p);
  }
  tree.hidden = std::move(kept);
  return tree;
}

}  // namespace densefeed
