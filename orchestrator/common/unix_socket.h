// Unix stream sockets (unix(7)) for densefeed's service: listening, connecting,
// and the connected peer's credentials (SO_PEERCRED), which the kernel fills
// in at connect(2) and the peer cannot forge.
#pragma once

#include <filesystem>
#include <string>

#include <sys/types.h>

namespace densefeed {

// An owned file descriptor, closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release();
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user;  // the uid's login (getpwuid_r), '' when it has none
};

// Binds and listens on `path` (a stale socket file there is replaced; any
// other file is an InfraError), then sets its mode and, when `group` is not
// empty, its group (chown(2)). Throws InfraError naming the path and errno.
Fd listen_unix(const std::filesystem::path& path, mode_t mode, const std::string& group);

// Connects to the socket at `path`. Throws InfraError naming it and why
// (no such socket, permission denied: not in its group, refused: the
// service is not running).
Fd connect_unix(const std::filesystem::path& path);

// The credentials of the peer of a connected unix socket. Throws InfraError.
PeerCredentials peer_credentials(int fd);

}  // namespace densefeed
