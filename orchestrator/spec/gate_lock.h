// gates/gates.lock: the sha256 of every gate file and every file a gate
// freezes, in sha256sum's format ("HEX  PATH", paths relative to the project
// folder), so `sha256sum -c gates/gates.lock` run there checks it too. Only a
// person re-locks (`densefeed gate lock`), and only what is committed on the
// trusted ref.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gate_spec.h"
#include "gate_store.h"

namespace densefeed {

// path relative to the project -> sha256 hex.
using LockTable = std::map<std::string, std::string>;

// Reads the lock. A missing file is an empty table. Throws InputError naming
// the line of a malformed entry.
LockTable read_lock(const GateStore& store);

// Problems with one file against the lock: empty when its hash matches.
// E.g. "gates/x.yaml: modified since the lock (locked 3fa1..., now 9c0e...)".
std::vector<std::string> check_locked_file(const GateStore& store, const LockTable& lock,
                                           const std::string& rel_path);

// Problems with a parsed gate's frozen files against the lock.
std::vector<std::string> check_frozen_files(const GateStore& store, const LockTable& lock,
                                            const GateSpec& gate);

// The gate files and frozen files that locking `names` (every gate when
// empty) would hash, relative to the project.
std::vector<std::string> files_to_lock(const GateStore& store, const std::vector<std::string>& names);

// Re-locks the named gates (all gates when `names` is empty) in `store` (the
// worktree), keeping the entries of other gates, and returns one line per
// change ("changed PATH", "added PATH", "removed PATH"). Throws InputError if
// a gate is invalid.
std::vector<std::string> write_lock(const GateStore& store, const std::vector<std::string>& names);

}  // namespace densefeed
