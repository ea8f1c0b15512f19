// The SQLite ledger engineers review (schema: ledger_schema.sql, compiled in).
// Only this file writes SQL. The schema, not this code, enforces that results
// are append-only and that benchmark rows need a green gate run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_runner.h"
#include "environment.h"
#include "gate_runner.h"
#include "manifest.h"

struct sqlite3;

namespace densefeed {

struct ExperimentRecord {
  const Manifest* manifest = nullptr;
  nlohmann::ordered_json candidate_params;  // completed with gate defaults
  nlohmann::ordered_json base_params;
  std::string candidate_sha;  // resolved commit ("" when not a git checkout)
  std::string base_sha;
  bool worktree_dirty = false;  // densefeed's checkout had uncommitted changes
};

struct GateRunRecord {
  std::string gate;
  std::string gate_sha256;
  std::vector<std::string> lock_problems;
  std::string profile;
  std::uint64_t seed = 0;
  std::string started_at;  // ISO 8601 UTC
  const GateResult* result = nullptr;  // the verdict lives here (lock problems: red, no cases)
  std::string provenance_json = "{}";  // Provenance as JSON
};

class Ledger {
 public:
  enum class Mode { read_write, read_only };
  // read_write opens or creates the file, its folder and the schema;
  // read_only (ledger list/show) never writes and refuses a file that is not
  // a densefeed ledger. Throws InputError for a file that is not a densefeed
  // ledger (or, read-only, does not exist), InfraError when SQLite fails.
  explicit Ledger(const std::filesystem::path& path, Mode mode = Mode::read_write);
  ~Ledger();
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  std::int64_t record_experiment(const ExperimentRecord& record);
  // Gate run, its cases and metrics in one transaction; returns the gate run id.
  std::int64_t record_gate_run(std::int64_t experiment_id, const GateRunRecord& record);
  // Bench cases and the environment in one transaction. Throws InfraError
  // carrying SQLite's message if the database refuses (e.g. the gate run is
  // not green).
  void record_bench(std::int64_t experiment_id, std::int64_t gate_run_id, const BenchResult& bench,
                    const Environment& environment, const std::string& candidate_sha, const std::string& base_sha,
                    bool worktree_dirty);

  // A noise-floor measurement (`densefeed bench calibrate`).
  struct Calibration {
    std::string gate, gate_sha256, case_label, host;
    nlohmann::ordered_json params;
    int comparisons = 0;
    double noise_floor = 0;
    double false_verdict_rate = 0;
    nlohmann::ordered_json verdicts;
  };
  void record_calibration(const Calibration& c);
  // The latest noise floor per bench case label of `gate` on `host`.
  std::map<std::string, double> noise_floors(const std::string& gate, const std::string& host) const;

  // One object per experiment, newest last: id, name, gate, verdict, reason, submitted_at, speedups.
  nlohmann::ordered_json list() const;
  // Everything recorded for one experiment. Throws InputError if there is no such id.
  nlohmann::ordered_json show(std::int64_t experiment_id) const;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  sqlite3* db_ = nullptr;
};

// Current time as ISO 8601 UTC ("2026-11-29T19:05:57Z").
std::string utc_now();

}  // namespace densefeed
