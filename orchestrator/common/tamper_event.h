// Something densefeed trusts, found altered before use: a file of an export
// of a commit (the gate store, a revision's source) that is not the commit's,
// or a cached revision build whose seal does not match its files. The finder
// returns these as values (it may have no ledger at hand); whoever holds the
// ledger records them (Ledger::record_tamper), and `densefeed audit` fails
// until a person acknowledges each (`densefeed audit acknowledge ID`).
#pragma once

#include <string>

namespace densefeed {

enum class TamperKind {
  export_changed,  // a file's bytes or mode are not the commit's blob
  export_missing,  // a file of the commit is not in the export
  export_extra,    // a file or folder in the export is not in the commit
  export_link,     // a file swapped for a symbolic link (or a link's target changed)
  build_seal,      // a cached build's files do not match the seal written after its build (or the seal is gone)
};

// "export_changed", ...: the ledger's tamper_events.kind.
const char* to_string(TamperKind kind);

struct TamperEvent {
  TamperKind kind = TamperKind::export_changed;
  std::string path;    // absolute path of the file (or folder) that differed
  std::string detail;  // what was expected and what was found
  std::string commit;  // the commit the export or build is of (full SHA)
};

inline const char* to_string(TamperKind kind) {
  switch (kind) {
    case TamperKind::export_changed: return "export_changed";
    case TamperKind::export_missing: return "export_missing";
    case TamperKind::export_extra: return "export_extra";
    case TamperKind::export_link: return "export_link";
    case TamperKind::build_seal: return "build_seal";
  }
  return "?";
}

}  // namespace densefeed
