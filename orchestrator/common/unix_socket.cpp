#include "unix_socket.h"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "error.h"

namespace densefeed {

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

int Fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

namespace {

sockaddr_un address_of(const std::filesystem::path& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string s = path.string();
  if (s.size() >= sizeof(a.sun_path)) {
    throw InfraError(fmt::format("socket path {} is longer than {} bytes (unix(7)'s limit)", s, sizeof(a.sun_path) - 1));
  }
  std::memcpy(a.sun_path, s.c_str(), s.size() + 1);
  return a;
}

[[noreturn]] void fail(const std::string& what, const std::filesystem::path& path) {
  throw InfraError(fmt::format("{} {}: {}", what, path.string(), std::strerror(errno)));
}

}  // namespace

Fd listen_unix(const std::filesystem::path& path, mode_t mode, const std::string& group) {
  const sockaddr_un a = address_of(path);
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) throw InfraError(fmt::format("{} exists and is not a socket: remove it or name another socket", path.string()));
    ::unlink(path.c_str());
  }
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) fail("cannot make a socket for", path);
  // Made with no permissions, then opened to the group: no window in which
  // another user could connect.
  const mode_t old = ::umask(0777);
  const int bound = ::bind(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a));
  ::umask(old);
  if (bound != 0) fail("cannot bind", path);
  if (!group.empty()) {
    const struct group* g = ::getgrnam(group.c_str());
    if (g == nullptr) throw InfraError(fmt::format("no group '{}' for the socket {}", group, path.string()));
    if (::chown(path.c_str(), static_cast<uid_t>(-1), g->gr_gid) != 0) fail("cannot give the socket to group " + group + ":", path);
  }
  if (::chmod(path.c_str(), mode) != 0) fail("cannot set the mode of", path);
  if (::listen(fd.get(), 64) != 0) fail("cannot listen on", path);
  return fd;
}

Fd connect_unix(const std::filesystem::path& path) {
  const sockaddr_un a = address_of(path);
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) fail("cannot make a socket for", path);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) {
    const int e = errno;
    const char* why = e == ENOENT        ? "no such socket (is the service running, and is this its socket?)"
                      : e == EACCES      ? "permission denied (the socket is open to its group only: ask for the service's agents group)"
                      : e == ECONNREFUSED ? "connection refused (the service is not running)"
                                          : std::strerror(e);
    throw InfraError(fmt::format("cannot reach the densefeed service at {}: {}", path.string(), why));
  }
  return fd;
}

PeerCredentials peer_credentials(int fd) {
  ucred c{};
  socklen_t len = sizeof(c);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0) throw InfraError(fmt::format("SO_PEERCRED: {}", std::strerror(errno)));
  PeerCredentials p{c.pid, c.uid, c.gid, {}};
  std::vector<char> buf(16384);
  struct passwd pw{};
  struct passwd* found = nullptr;
  if (::getpwuid_r(c.uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) p.user = found->pw_name;
  return p;
}

}  // namespace densefeed
