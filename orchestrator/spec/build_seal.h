// The seal of a cached revision build (revision_build.h): written after the
// build, checked before the build is reused, so that a binary or script
// replaced in LEDGER-builds/ between runs is never run as the revision's.
// The seal file (BUILD_DIR/seal) holds the listing of the build's files and
// an HMAC-SHA256 of it under the ledger's key (ledger_key.h, RFC 2104): one
// who can write the builds folder but lacks the key cannot re-seal an edit.
//
// The listing: one line per entry under BUILD_DIR/src and BUILD_DIR/build
// (the export and what its build commands made), sorted by relative path:
// "PATH\tf\tSHA256\tMODE" for a regular file (sha256 of its bytes, its
// permission bits in octal), "PATH\tl\tTARGET" for a symbolic link,
// "PATH\td\tMODE" for a folder, "PATH\to" for anything else.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "tamper_event.h"

namespace densefeed {

inline constexpr const char* kBuildSealFile = "seal";

// The listing of `build_dir` as above. Throws InfraError when a file cannot be read.
std::string build_listing(const std::filesystem::path& build_dir);

// Writes build_dir/seal for `key` (the ledger key's bytes). Throws
// InfraError when it cannot be written.
void write_build_seal(const std::filesystem::path& build_dir, const std::string& key);

// nullopt when build_dir/seal is a seal under `key` of the listing the
// folder has now; else a build_seal TamperEvent for `commit` naming the first
// path that differs (or that the seal is missing, or was itself altered).
std::optional<TamperEvent> check_build_seal(const std::filesystem::path& build_dir, const std::string& key, const std::string& commit);

}  // namespace densefeed
