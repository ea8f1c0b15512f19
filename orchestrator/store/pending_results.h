// Results computed but not yet in the ledger. A run writes its gate run here
// (RUN_FOLDER/pending-gate-run.json) before it takes the ledger's write lock,
// and removes it once the ledger holds it; a run that could not get the lock
// (LedgerBusy) or that was killed while waiting leaves it, and `densefeed
// ledger recover` records it later. So no computed result is lost to a
// held lock or a crash.
//
// The file is bound to its run: it names the experiment and the nonce the
// ledger issued when the run started (run_nonces), and carries an
// HMAC-SHA256 under the ledger's key (Ledger::sign) of the canonical JSON of
// everything else in it ("densefeed pending gate run v1\n" + the document
// without "signature", keys sorted, nlohmann::json::dump()). `recover`
// records only a file that verifies; one that is unsigned, altered, moved
// from another experiment's run folder or names a nonce the ledger never
// issued to its experiment is refused, kept, and named.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gate_result.h"
#include "ledger.h"

namespace densefeed {

inline constexpr const char* kPendingGateRunFile = "pending-gate-run.json";

// A gate run as the ledger records it: the record's fields and the result's
// fields that record_gate_run reads (verdicts, reasons, typed failures,
// metrics, slices, wrong candidates), not the harness logs.
struct PendingGateRun {
  std::int64_t experiment_id = 0;
  GateRunRecord record;  // record.result points at `result`
  GateResult result;
};

// Writes `dir`/pending-gate-run.json atomically (a temporary file renamed),
// with the experiment's latest run nonce and signed with `ledger`'s key.
// Throws InfraError when it cannot, or when the experiment was never started
// (no nonce to bind the file to).
std::filesystem::path write_pending_gate_run(const std::filesystem::path& dir, std::int64_t experiment_id,
                                             const GateRunRecord& record, const Ledger& ledger);
// The message a pending file's signature is an HMAC of: see above. `doc` is
// the file's JSON; its "signature" member (if any) is left out.
std::string pending_signed_message(const nlohmann::json& doc);
// Reads one. Throws InputError naming the file when it is not one.
PendingGateRun read_pending_gate_run(const std::filesystem::path& file);

// Every RUNS/ID/pending-gate-run.json, by experiment id.
std::vector<std::filesystem::path> pending_gate_runs(const std::filesystem::path& runs_dir);

// `densefeed ledger recover`: records every pending gate run whose
// signature, experiment and nonce verify and whose experiment has no gate
// stage yet, with its bench and trace stages skipped (the run stopped before
// them) and the overall verdict, and removes each file once the ledger holds
// it (also when it held it already). A file that does not verify is refused
// (RecoveredRun::refusal) and kept where it is.
// Why `recover` refused a file (none: it did not).
enum class PendingRefusal {
  none,
  malformed,      // not JSON, or not a pending gate run densefeed wrote
  unsigned_file,  // no signature
  altered,        // the signature does not verify under the ledger's key
  transplanted,   // in another experiment's run folder than its own, or its nonce was issued to another experiment
  never_started,  // its experiment was never started (no nonce issued to it)
};
// "malformed", "unsigned", "altered", "transplanted", "never started".
const char* to_string(PendingRefusal r);

struct RecoveredRun {
  std::int64_t experiment_id = 0;  // as the file names it (or its run folder, when it names none)
  std::string file;
  std::string outcome;  // recorded | already recorded | refused
  PendingRefusal refusal = PendingRefusal::none;
  std::string reason;   // when refused: what did not hold, in words
  std::string verdict;  // the overall verdict now
  std::size_t cases = 0;
};
std::vector<RecoveredRun> recover_pending(Ledger& ledger, const std::filesystem::path& runs_dir);

}  // namespace densefeed
