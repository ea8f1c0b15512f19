// The workspace: what densefeed writes next to a ledger, keyed on the ledger
// file so that two ledgers in one folder never share anything. For a ledger
// L.db: L-runs/ID/ (each experiment's harness folders and logs), L-builds/
// (revision builds, cached per commit and build spec), L-exports/ (clean
// exports of trusted-ref commits: the gate store), L-calibrations/,
// L-caches/ (compile caches per revision).
#pragma once

#include <filesystem>

namespace densefeed {

struct Workspace {
  std::filesystem::path ledger;  // absolute path of the SQLite file

  std::filesystem::path with_suffix(const char* suffix) const {
    return ledger.parent_path() / (ledger.stem().string() + suffix);
  }
  std::filesystem::path runs() const { return with_suffix("-runs"); }
  std::filesystem::path builds() const { return with_suffix("-builds"); }
  std::filesystem::path exports() const { return with_suffix("-exports"); }
  std::filesystem::path calibrations() const { return with_suffix("-calibrations"); }
  // Compile caches, one folder per revision under test (arm_context.h
  // ArmContext::cache_dir): L-caches/KEY.
  std::filesystem::path caches() const { return with_suffix("-caches"); }
};

}  // namespace densefeed
