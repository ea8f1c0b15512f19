#include "ledger_key.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <cstring>
#include <mutex>
#include <optional>

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

namespace {

std::filesystem::path keys_folder() { return config_home() / "densefeed" / "keys"; }

std::optional<std::filesystem::path> registered_key_file(const std::filesystem::path& ledger) {
  const std::lock_guard lock(g_mutex);
  if (auto it = registry().find(std::filesystem::weakly_canonical(ledger)); it != registry().end()) return it->second;
  return std::nullopt;
}

// Writes `bytes` to a new file (0600, O_EXCL) in a folder made 0700. Returns
// false when the file exists already (another process made it first).
bool write_new_key(const std::filesystem::path& file, const unsigned char* bytes, std::size_t n) {
  std::error_code ec;
  std::filesystem::create_directories(file.parent_path(), ec);
  ::chmod(file.parent_path().c_str(), 0700);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return false;
    throw InfraError(fmt::format("{}: cannot create the ledger's chain key: {}", file.string(), std::strerror(errno)));
  }
  const bool ok = ::write(fd, bytes, n) == static_cast<ssize_t>(n) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) throw InfraError(fmt::format("{}: cannot write the ledger's chain key", file.string()));
  return true;
}

void random_key(unsigned char (&bytes)[kKeyBytes]) {
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw InfraError("OpenSSL RAND_bytes failed: cannot make the ledger's chain key");
}

std::string how_to_pass() {
  return "pass the ledger's key with --ledger-key FILE or DENSEFEED_LEDGER_KEY=FILE (a regular file of 32 bytes, mode 0600, yours)";
}

// Throws InputError naming `ledger` when `k` is not the key `fingerprint` names.
void require_fingerprint(const std::filesystem::path& ledger, const LedgerKey& k, const std::string& fingerprint) {
  if (fingerprint.empty() || k.fingerprint == fingerprint) return;
  throw InputError(ledger.string(), {}, "",
                   fmt::format("the chain key in {} (fingerprint {}) is not this ledger's: its chain is sealed with the key of "
                               "fingerprint {}; {}",
                               k.file.string(), k.fingerprint.substr(0, 32), fingerprint.substr(0, 32), how_to_pass()));
}

// A new key named by its own identity in the keys folder.
LedgerKey create_identity_key() {
  for (;;) {
    unsigned char bytes[kKeyBytes];
    random_key(bytes);
    const std::string fingerprint = sha256_hex(std::string(reinterpret_cast<const char*>(bytes), kKeyBytes));
    const auto file = keys_folder() / (fingerprint.substr(0, 32) + ".key");
    if (write_new_key(file, bytes, kKeyBytes)) return load_ledger_key(file, false);
  }
}

}  // namespace

std::filesystem::path ledger_key_file(const std::filesystem::path& ledger, const std::string& fingerprint) {
  if (auto registered = registered_key_file(ledger)) return *registered;
  if (fingerprint.empty()) return keys_folder();
  return keys_folder() / (fingerprint.substr(0, 32) + ".key");
}

LedgerKey find_ledger_key(const std::filesystem::path& ledger, const std::string& fingerprint, bool create) {
  if (auto registered = registered_key_file(ledger)) {
    LedgerKey k = load_ledger_key(*registered, create && fingerprint.empty());
    require_fingerprint(ledger, k, fingerprint);
    return k;
  }
  if (fingerprint.empty()) {
    if (!create) throw InputError(ledger.string(), {}, "", "the ledger has no chain key yet (its first write makes one)");
    return create_identity_key();
  }
  const auto file = ledger_key_file(ledger, fingerprint);
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0) {
    // A key made before ledgers had an identity: named by the ledger's path.
    const auto old = keys_folder() / (sha256_hex(std::filesystem::weakly_canonical(ledger).string()).substr(0, 16) + ".key");
    if (::lstat(old.c_str(), &st) == 0) {
      LedgerKey k = load_ledger_key(old, false);
      require_fingerprint(ledger, k, fingerprint);
      if (::link(old.c_str(), file.c_str()) == 0 || errno == EEXIST) k.file = file;
      return k;
    }
    throw InputError(file.string(), {}, "",
                     fmt::format("the ledger's chain key is not here: {} was sealed with the key of fingerprint {} (made with the "
                                 "ledger; without it the chain cannot be checked); {}",
                                 ledger.string(), fingerprint.substr(0, 32), how_to_pass()));
  }
  LedgerKey k = load_ledger_key(file, false);
  require_fingerprint(ledger, k, fingerprint);
  return k;
}

LedgerKey load_ledger_key(const std::filesystem::path& file, bool create) {
  LedgerKey k;
  k.file = file;
  struct stat st {};
  if (::lstat(file.c_str(), &st) != 0) {
    if (!create) {
      throw InputError(file.string(), {}, "", "the ledger's chain key is not here (it was created with the ledger; without it "
                                              "the chain cannot be checked). Restore it, or " + how_to_pass());
    }
    unsigned char bytes[kKeyBytes];
    random_key(bytes);
    write_new_key(file, bytes, sizeof bytes);
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
