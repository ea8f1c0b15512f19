#include "export_verify.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <openssl/evp.h>

#include "error.h"
#include "process_runner.h"

namespace densefeed {
namespace {

struct TreeEntry {
  std::string mode;  // 100644, 100755, 120000, 160000
  std::string id;    // blob (or commit, for a submodule) id, hex
};

class BlobHash {
 public:
  explicit BlobHash(bool sha256) : ctx_(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
    if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), sha256 ? EVP_sha256() : EVP_sha1(), nullptr) != 1) {
      throw InfraError("OpenSSL: cannot initialise the git blob hash");
    }
  }
  void update(const void* data, std::size_t n) {
    if (EVP_DigestUpdate(ctx_.get(), data, n) != 1) throw InfraError("OpenSSL: git blob hash update failed");
  }
  std::string hex() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), md.data(), &len) != 1) throw InfraError("OpenSSL: git blob hash final failed");
    static const char* digits = "0123456789abcdef";
    std::string out(2 * len, '0');
    for (unsigned int i = 0; i < len; ++i) {
      out[2 * i] = digits[md[i] >> 4];
      out[2 * i + 1] = digits[md[i] & 15];
    }
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

// The blob id of the regular file at `p` (opened without following a link),
// or "" when it cannot be opened as one.
std::string file_blob_id(const std::filesystem::path& p, bool sha256) {
  const int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return "";
  }
  BlobHash h(sha256);
  const std::string header = fmt::format("blob {}", static_cast<long long>(st.st_size));
  h.update(header.data(), header.size() + 1);  // with its NUL
  std::array<char, 1 << 16> buffer{};
  long long total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      ::close(fd);
      return "";
    }
    if (n == 0) break;
    h.update(buffer.data(), static_cast<std::size_t>(n));
    total += n;
  }
  ::close(fd);
  if (total != static_cast<long long>(st.st_size)) return "";  // changed while read: not what the header said
  return h.hex();
}

std::map<std::string, TreeEntry> commit_tree(const std::filesystem::path& repo_top, const std::string& prefix,
                                             const std::string& commit) {
  const std::string tree = prefix.empty() ? commit : commit + ":" + prefix.substr(0, prefix.size() - 1);
  const auto out = capture_output({"git", "-C", repo_top.string(), "ls-tree", "-r", "-z", "--full-tree", tree}, repo_top,
                                  std::chrono::minutes(2));
  if (!out) {
    throw InfraError(fmt::format("git ls-tree of {} in {} failed: densefeed cannot verify its export", tree, repo_top.string()));
  }
  std::map<std::string, TreeEntry> entries;
  std::size_t at = 0;
  while (at < out->size()) {
    const std::size_t end = out->find('\0', at);
    const std::string line = out->substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? out->size() : end + 1;
    // "<mode> SP <type> SP <object> TAB <path>"
    const std::size_t tab = line.find('\t');
    const std::size_t s1 = line.find(' ');
    const std::size_t s2 = s1 == std::string::npos ? s1 : line.find(' ', s1 + 1);
    if (tab == std::string::npos || s2 == std::string::npos || s2 > tab) {
      throw InfraError(fmt::format("git ls-tree of {}: cannot read its line '{}'", tree, line));
    }
    entries[line.substr(tab + 1)] = {line.substr(0, s1), line.substr(s2 + 1, tab - s2 - 1)};
  }
  return entries;
}

}  // namespace

std::string git_blob_id(std::string_view bytes, bool sha256) {
  BlobHash h(sha256);
  const std::string header = fmt::format("blob {}", bytes.size());
  h.update(header.data(), header.size() + 1);
  h.update(bytes.data(), bytes.size());
  return h.hex();
}

ExportCheck verify_export(const std::filesystem::path& repo_top, const std::string& prefix, const std::string& commit,
                          const std::filesystem::path& root) {
  ExportCheck check;
  const auto tree = commit_tree(repo_top, prefix, commit);
  check.files = tree.size();
  std::set<std::string> folders;  // every folder the commit's paths lie in, and its submodules (exported empty)
  for (const auto& [path, e] : tree) {
    for (auto p = std::filesystem::path(path).parent_path(); !p.empty(); p = p.parent_path()) folders.insert(p.string());
    if (e.mode == "160000") folders.insert(path);
  }
  std::size_t differ = 0;
  const auto found = [&](TamperKind kind, const std::filesystem::path& p, std::string detail) {
    ++differ;
    if (check.tampered.size() + 1 < kMaxTamperEventsPerExport) {
      check.tampered.push_back({kind, p.string(), std::move(detail), commit});
    }
  };
  std::set<std::string> seen;
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(root, std::filesystem::directory_options::none, ec), end;
  if (ec) {
    found(TamperKind::export_missing, root, fmt::format("the export folder cannot be read: {}", ec.message()));
  }
  for (; !ec && it != end; it.increment(ec)) {
    const auto& p = it->path();
    const std::string rel = p.lexically_relative(root).string();
    const auto st = it->symlink_status(ec);
    if (ec) break;
    const auto want = tree.find(rel);
    if (std::filesystem::is_symlink(st)) {
      if (want == tree.end() || want->second.mode != "120000") {
        found(TamperKind::export_link, p, fmt::format("a symbolic link to '{}' where the commit has {}", std::filesystem::read_symlink(p, ec).string(),
                                                       want == tree.end() ? std::string("nothing") : "a file (mode " + want->second.mode + ")"));
      } else {
        const std::string target = std::filesystem::read_symlink(p, ec).string();
        const bool sha256 = want->second.id.size() == 64;
        if (git_blob_id(target, sha256) != want->second.id) {
          found(TamperKind::export_link, p, fmt::format("a symbolic link to '{}', not the commit's target (blob {})", target, want->second.id));
        }
      }
      seen.insert(rel);
      continue;
    }
    if (std::filesystem::is_directory(st)) {
      if (!folders.count(rel)) {
        found(TamperKind::export_extra, p, "a folder the commit does not have");
        it.disable_recursion_pending();
      }
      continue;
    }
    seen.insert(rel);
    if (want == tree.end()) {
      found(TamperKind::export_extra, p, std::filesystem::is_regular_file(st) ? "a file the commit does not have"
                                                                                : "something that is not a file, where the commit has nothing");
      continue;
    }
    const auto& mode = want->second.mode;
    if (!std::filesystem::is_regular_file(st) || (mode != "100644" && mode != "100755")) {
      found(TamperKind::export_changed, p, fmt::format("not a regular file, or where the commit has mode {}", mode));
      continue;
    }
    const bool exec = (st.permissions() & std::filesystem::perms::owner_exec) != std::filesystem::perms::none;
    if (exec != (mode == "100755")) {
      found(TamperKind::export_changed, p, fmt::format("its mode is {}executable, the commit's ({}) is {}", exec ? "" : "not ", mode,
                                                       mode == "100755" ? "executable" : "not"));
      continue;
    }
    const std::string id = file_blob_id(p, want->second.id.size() == 64);
    if (id != want->second.id) {
      found(TamperKind::export_changed, p,
            id.empty() ? std::string("cannot be read as a regular file")
                       : fmt::format("its bytes are blob {}, the commit's are blob {}", id, want->second.id));
    }
  }
  if (ec) found(TamperKind::export_missing, root, fmt::format("the export folder cannot be walked: {}", ec.message()));
  for (const auto& [path, e] : tree) {
    if (e.mode == "160000" || seen.count(path)) continue;
    found(TamperKind::export_missing, root / path, fmt::format("the commit's file (mode {}, blob {}) is not in the export", e.mode, e.id));
  }
  if (differ >= kMaxTamperEventsPerExport) {
    check.tampered.push_back({TamperKind::export_changed, root.string(),
                              fmt::format("and {} more differences in this export", differ - (kMaxTamperEventsPerExport - 1)), commit});
  }
  return check;
}

}  // namespace densefeed
