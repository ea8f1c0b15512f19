// Verifies an export of a commit (revision.h export_revision) against the
// commit itself before densefeed uses it: the export is data that anyone who
// can write the workspace can change, the commit is not. The commit's tree
// comes from git (`git ls-tree -r -z --full-tree COMMIT[:PREFIX]`: each
// file's mode and blob id); each exported file's git blob id is recomputed
// from its bytes (the `git hash-object` algorithm: SHA-1, or SHA-256 in a
// SHA-256 repository, of "blob SIZE\0" + bytes), so nothing densefeed wrote
// at export time has to be trusted. A difference of bytes, of the executable
// bit, a file that became a symbolic link (or a link whose target moved), a
// missing file and any file or folder the commit does not have are each a
// TamperEvent (tamper_event.h).
//
// Limits: git attributes that make `git archive` rewrite a file
// (export-subst, eol conversion, filters) make a fresh export differ from its
// blobs; open_gate_store refuses such an export (InfraError naming the files)
// rather than accept bytes it cannot check.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "tamper_event.h"

namespace densefeed {

// At most this many events are returned for one export (the last one says
// how many more differed): a tree of planted files cannot flood the ledger.
inline constexpr std::size_t kMaxTamperEventsPerExport = 16;

struct ExportCheck {
  std::vector<TamperEvent> tampered;  // empty: the export is the commit's
  std::size_t files = 0;              // files of the commit checked
};

// Compares `root` (an export of the folder `prefix` — "" or "sub/dir/" — of
// the repository at `repo_top`, at `commit`) with the commit's tree.
// Throws InfraError when git cannot list the commit's tree or a file cannot
// be read for a reason other than its absence.
ExportCheck verify_export(const std::filesystem::path& repo_top, const std::string& prefix, const std::string& commit,
                          const std::filesystem::path& root);

// The git blob id of `bytes`: hex SHA-1 (40 characters) or, with `sha256`,
// hex SHA-256 (64) of "blob <size>\0" followed by the bytes.
std::string git_blob_id(std::string_view bytes, bool sha256 = false);

}  // namespace densefeed
