// The configuration of a densefeed service (`densefeed serve --config FILE`,
// schemas/service.schema.json): one project, served to agents and people over
// a unix socket by a process running as its own user.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <sys/types.h>

namespace densefeed {

struct ServiceConfig {
  std::filesystem::path file;        // where it was read from
  std::filesystem::path repository;  // the git repository fetched from (absolute)
  std::string project = ".";         // the project folder inside it (relative)
  std::string trusted_ref;           // the branch whose configuration and gates are trusted
  std::filesystem::path state;       // the state folder (absolute; mode 0700)
  std::filesystem::path socket;      // the unix socket (absolute)
  std::string socket_group;          // '' = the service user's group
  std::vector<uid_t> people;         // uids allowed the person-only verbs (logins resolved at load)
  std::vector<std::string> head_witness;  // argv; the head is appended
  struct Worker {
    int slots = 1;
    std::string profile = "quick";
    std::string gpus = "auto";
    std::string executor = "local";
    int jobs = 0;  // 0: the worker's default
  } worker;
  std::uint64_t snapshot_limit_bytes = 256ull << 20;

  // The service's clone of the repository, the project in it, and the
  // XDG_CONFIG_HOME of the service (where the ledger's key is made).
  std::filesystem::path mirror() const { return state / "repo"; }
  std::filesystem::path project_dir() const { return (mirror() / project).lexically_normal(); }
  std::filesystem::path config_home() const { return state / "config"; }
  std::filesystem::path requests_dir() const { return state / "requests"; }
};

// Reads and validates `file`. Throws InputError naming the file, line and
// field for a schema violation, a relative path, a project path that leaves
// the repository, an unknown login in people or an unknown socket_group.
ServiceConfig load_service_config(const std::filesystem::path& file);

}  // namespace densefeed
