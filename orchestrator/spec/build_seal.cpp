#include "build_seal.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "error.h"
#include "ledger_key.h"
#include "sha256.h"

namespace densefeed {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string path_of(const std::string& line) { return line.substr(0, line.find('\t')); }

}  // namespace

std::string build_listing(const std::filesystem::path& build_dir) {
  std::vector<std::string> lines;
  for (const char* part : {"src", "build"}) {
    const auto top = build_dir / part;
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::symlink_status(top, ec))) continue;
    std::filesystem::recursive_directory_iterator it(top, std::filesystem::directory_options::none, ec), end;
    for (; !ec && it != end; it.increment(ec)) {
      const auto& p = it->path();
      const std::string rel = p.lexically_relative(build_dir).string();
      struct stat st {};
      if (::lstat(p.c_str(), &st) != 0) throw InfraError(fmt::format("{}: cannot stat it to seal the build", p.string()));
      const unsigned mode = st.st_mode & 07777;
      if (S_ISLNK(st.st_mode)) lines.push_back(fmt::format("{}\tl\t{}", rel, std::filesystem::read_symlink(p, ec).string()));
      else if (S_ISDIR(st.st_mode)) lines.push_back(fmt::format("{}\td\t{:o}", rel, mode));
      else if (S_ISREG(st.st_mode)) lines.push_back(fmt::format("{}\tf\t{}\t{:o}", rel, sha256_file(p), mode));
      else lines.push_back(fmt::format("{}\to", rel));
    }
    if (ec) throw InfraError(fmt::format("{}: cannot walk it to seal the build: {}", top.string(), ec.message()));
  }
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

void write_build_seal(const std::filesystem::path& build_dir, const std::string& key) {
  const std::string listing = build_listing(build_dir);
  const auto tmp = build_dir / (std::string(kBuildSealFile) + ".tmp");
  {
    std::ofstream f(tmp, std::ios::trunc | std::ios::binary);
    f << "hmac-sha256 " << hmac_sha256_hex(key, listing) << "\n" << listing;
    f.flush();
    if (!f) throw InfraError(fmt::format("{}: cannot write the build's seal", tmp.string()));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, build_dir / kBuildSealFile, ec);
  if (ec) throw InfraError(fmt::format("{}: cannot write the build's seal: {}", (build_dir / kBuildSealFile).string(), ec.message()));
}

std::optional<TamperEvent> check_build_seal(const std::filesystem::path& build_dir, const std::string& key, const std::string& commit) {
  const auto file = build_dir / kBuildSealFile;
  const auto event = [&](const std::filesystem::path& p, std::string detail) {
    return TamperEvent{TamperKind::build_seal, p.string(), std::move(detail), commit};
  };
  std::ifstream f(file, std::ios::binary);
  if (!f) return event(file, "the cached build has no seal (removed, or built by a densefeed that did not seal builds)");
  std::string first;
  std::getline(f, first);
  const std::string sealed((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::string prefix = "hmac-sha256 ";
  if (first.rfind(prefix, 0) != 0 || first.substr(prefix.size()) != hmac_sha256_hex(key, sealed)) {
    return event(file, "the seal's signature does not match its listing under the ledger's key: the seal itself was altered");
  }
  const std::string now = build_listing(build_dir);
  if (now == sealed) return std::nullopt;
  // Name the first path whose line differs.
  const auto a = lines_of(sealed), b = lines_of(now);
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  if (i < a.size() && (i >= b.size() || path_of(a[i]) < path_of(b[i]))) {
    return event(build_dir / path_of(a[i]), "sealed after the build, it is gone");
  }
  if (i < b.size() && (i >= a.size() || path_of(b[i]) < path_of(a[i]))) {
    return event(build_dir / path_of(b[i]), "it was not there when the build was sealed");
  }
  return event(build_dir / path_of(a[i]), fmt::format("sealed as '{}', found '{}'", a[i], b[i]));
}

}  // namespace densefeed
