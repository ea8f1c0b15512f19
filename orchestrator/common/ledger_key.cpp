#include "ledger_key.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "error.h"
#include "sha256.h"

namespace densefeed {
namespace {

constexpr std::size_t kKeyBytes = 32;

std::mutex g_mutex;
std::map<std::filesystem::path, std::filesystem::path>& registry() {
  static std::map<std::filesystem::path, std::filesystem::path> r;
  return r;
}

std::filesystem::path config_home() {
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x == '/') return x;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home && *home ? home : "/tmp") / ".config";
}

}  // namespace

void set_ledger_key_file(const std::filesystem::path& ledger, const std::filesystem::path& key) {
  const std::lock_guard lock(g_mutex);
  registry()[std::filesystem::weakly_canonical(ledger)] = key;
}

void forget_ledger_key_file(const std::filesystem::path& ledger) {
  const std::lock_guard lock(g_mutex);
  registry().erase(std::filesystem::weakly_canonical(ledger));
}

std::filesystem::path ledger_key_file(const std::filesystem::path& ledger) {
  const auto canonical = std::filesystem::weakly_canonical(ledger);
  {
    const std::lock_guard lock(g_mutex);
    if (auto it = registry().find(canonical); it != registry().end()) return it->second;
  }
  return config_home() / "densefeed" / "keys" / (sha256_hex(canonical.string()).substr(0, 16) + ".key");
}

LedgerKey load_ledger_key(const std::filesystem::path& file, bool create) {
  LedgerKey k;
  k.file = file;
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0) {
    if (!create) {
      throw InputError(file.string(), {}, "", "the ledger's chain key is not here (it was created with the ledger; without it "
                                              "the chain cannot be checked). Restore it, or set ledger_key in densefeed.yaml");
    }
    std::error_code ec;
    std::filesystem::create_directories(file.parent_path(), ec);
    ::chmod(file.parent_path().c_str(), 0700);
    unsigned char bytes[kKeyBytes];
    if (RAND_bytes(bytes, sizeof bytes) != 1) throw InfraError("OpenSSL RAND_bytes failed: cannot make the ledger's chain key");
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
      const bool ok = ::write(fd, bytes, sizeof bytes) == static_cast<ssize_t>(sizeof bytes) && ::fsync(fd) == 0;
      ::close(fd);
      if (!ok) throw InfraError(fmt::format("{}: cannot write the ledger's chain key", file.string()));
    } else if (errno != EEXIST) {
      throw InfraError(fmt::format("{}: cannot create the ledger's chain key: {}", file.string(), std::strerror(errno)));
    }
    // EEXIST: another process made it first; read theirs.
    if (::lstat(file.c_str(), &st) != 0) throw InfraError(fmt::format("{}: the chain key vanished", file.string()));
  }
  if (!S_ISREG(st.st_mode)) throw InputError(file.string(), {}, "", "the ledger's chain key must be a regular file (not a link)");
  if (st.st_uid != ::getuid()) throw InputError(file.string(), {}, "", "the ledger's chain key belongs to another user");
  if (st.st_mode & 077) {
    throw InputError(file.string(), {}, "", fmt::format("the ledger's chain key is readable by others (mode {:o}); chmod 600 it",
                                                        st.st_mode & 0777));
  }
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) throw InfraError(fmt::format("{}: cannot read the ledger's chain key: {}", file.string(), std::strerror(errno)));
  char buf[kKeyBytes + 1];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n != static_cast<ssize_t>(kKeyBytes)) {
    throw InputError(file.string(), {}, "", fmt::format("the ledger's chain key must hold {} bytes", kKeyBytes));
  }
  k.bytes.assign(buf, kKeyBytes);
  k.fingerprint = sha256_hex(k.bytes);
  return k;
}

std::string hmac_sha256_hex(const std::string& key, const std::string& message) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
       message.size(), out, &len);
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", out[i]);
  return hex;
}

}  // namespace densefeed
