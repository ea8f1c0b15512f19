// The SQLite ledger engineers review (schema: ledger_schema.sql and the
// ledger_migration_N.sql files, compiled in; schemas/ledger.md documents it).
// Only the ledger writes SQL (store/ledger_*.cpp, one file per concern:
// open, chain, queue, results, review, audit, export, record; ledger_sql.h
// is what they share). The schema, not this code, enforces that results
// are append-only, that benchmark, trace and acceptance rows need a green gate
// run, and that promotion needs approvals. Every recorded row is linked into
// a sha256 hash chain (record_chain) that verify() recomputes.
//
// Every stage that was reached is a row (stage_outcomes) with its verdict and
// typed failure, and every ended experiment has its overall verdict
// (experiment_outcomes); summaries() reads them into the one typed record
// (experiment_summary.h) that every printer prints.
//
// Tamper evidence: each link of record_chain is an HMAC-SHA256 under a key
// kept outside the ledger (ledger_key.h); the head (seq:hash of the last link)
// kept elsewhere detects cut-off rows; the schema objects (tables, views,
// triggers, indexes) are compared with the SQL compiled in, and a ledger
// whose objects differ is refused on open (InputError naming the object),
// except in Mode::audit, which reports them (schema_differences()).
//
// Concurrency: every write is one BEGIN IMMEDIATE transaction that waits for
// other writers (SQLite's busy handler: retries with growing sleeps) up to the
// lock wait: DENSEFEED_LEDGER_BUSY_S seconds when set, else 60 s, or what
// set_lock_wait() says (a run: the gate's timeout when longer); past it the
// write throws LedgerBusy and a run keeps its results in its run folder
// (pending_results.h) for `densefeed ledger recover`. The file is in WAL mode, so
// readers never block writers. Migrations run on open inside such a
// transaction, so several processes opening an old file at once migrate it
// exactly once.
//
// Liveness: what a process runs (a worker's or a run's started experiment, a
// promote's acceptance run) has a heartbeat row that the process beats every
// DENSEFEED_HEARTBEAT_S seconds (default 10; heartbeat.h). A dead owner of
// this host is seen by its pid; one of another host by a heartbeat that has
// not moved for kStaleHeartbeats intervals (recover_dead_owners).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base_origin.h"
#include "bench_result.h"
#include "machine_ceilings.h"
#include "experiment_record.h"
#include "experiment_summary.h"
#include "process_identity.h"
#include "environment.h"
#include "gate_result.h"
#include "ledger_key.h"
#include "manifest.h"
#include "tamper_event.h"

struct sqlite3;

#include "error.h"
#include "experiment_state.h"
#include "utc_time.h"


namespace densefeed {

// What record_experiment writes: the manifest and its arms as resolved.
struct ExperimentSubmission {
  const Manifest* manifest = nullptr;
  nlohmann::ordered_json candidate_params;  // completed with gate defaults
  nlohmann::ordered_json base_params;
  std::string candidate_sha;  // resolved commit ("" when not a git checkout)
  std::string base_sha;
  bool worktree_dirty = false;  // densefeed's checkout had uncommitted changes
  BaseOrigin base_origin;       // who wrote the base (base_origin.h)
  // Issue 30: the experiment this one replays or narrows, and which step of
  // it this is; the run's --case filters (their texts; empty: every case).
  std::optional<std::int64_t> parent_id;
  std::string step;
  std::vector<std::string> case_filter;
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
  std::string sandbox;                  // how harnesses were confined ('' when not known)
  std::vector<nlohmann::ordered_json> output_capture;  // per case (index as in result->cases); may be empty
};

// One trace check's result (trace_findings row).
struct TraceFindingRecord {
  std::string arm = "candidate";  // candidate | base
  int check_index = 0;
  std::string kind;               // overlap | exposed | share
  nlohmann::ordered_json check;   // as the manifest wrote it
  bool passed = false;
  std::optional<double> value;    // overlap: fraction; exposed: ms; share: fraction
  std::optional<double> bound;
  nlohmann::ordered_json details = nlohmann::ordered_json::object();  // intervals involved
  std::string trace_file;
};

// One evaluated acceptance criterion (acceptance_criteria row).
struct CriterionRecord {
  std::string criterion;   // as written
  std::string statistic;   // median | mean | p90 | ...
  std::optional<double> lhs, rhs;
  bool passed = false;
};

struct AcceptanceRecord {
  std::string verdict;     // pass | fail | error
  std::string reason;
  nlohmann::ordered_json metrics = nlohmann::ordered_json::object();
  double wall_s = 0;
  std::string started_at;
  std::vector<CriterionRecord> criteria;
};

// An experiment taken from the queue by a worker.
struct ClaimedExperiment {
  std::int64_t id = 0;
  std::string manifest_path;  // as submitted (for messages only)
  std::string manifest_text;  // the text whose sha256 was recorded: what runs
  std::string manifest_sha256;
  std::int64_t heartbeat_id = 0;  // the heartbeat row the worker beats while it runs it
};

// A heartbeat is stale once it has not moved for this many of its own
// intervals: a beat late by one interval (a busy host, a lock wait) is not death.
inline constexpr int kStaleHeartbeats = 3;

// DENSEFEED_HEARTBEAT_S (seconds, > 0) when set, else 10: how often a process
// beats what it runs. Throws InputError naming the variable when it is set to
// something else than a positive number.
double default_heartbeat_s();

// What one reaper (a worker) has seen of heartbeats of other hosts: per
// heartbeat row, its beat count and when, by this process's steady clock, it
// first saw that count. A count that stands still for kStaleHeartbeats
// intervals by this clock is death, so the hosts' clocks need not agree.
struct HeartbeatWatch {
  struct Seen {
    std::int64_t beats = 0;
    std::chrono::steady_clock::time_point since;
  };
  std::map<std::int64_t, Seen> seen;  // heartbeat id ->
};

// An experiment whose owner died, and what was recorded for it.
struct RecoveredExperiment {
  std::int64_t id = 0;
  ExperimentEvent event = ExperimentEvent::interrupted;  // requeued, interrupted or cancelled
  std::string detail;                                     // why: whose death, seen how
};

// Who runs an acceptance run that is recorded `started` and has not ended.
struct RunningAcceptance {
  std::int64_t experiment_id = 0;
  std::string started_at;       // ISO 8601 UTC
  bool alive = false;           // its promote runs (this host: by pid; another: beat within kStaleHeartbeats intervals)
  std::string owner;            // "promote on HOST (pid P), last beat at T" or why it is not known
};

// What verify() found: ok, or the first broken link of the hash chain.
// The last link of the chain: "SEQ:HASH" as `ledger head` prints it.
struct ChainHead {
  std::int64_t seq = 0;  // 0: no link yet
  std::string hash;
  std::string text() const;
  // Parses "SEQ:HASH" (or "0:" for an empty chain); throws InputError naming `what`.
  static ChainHead parse(const std::string& text, const std::string& what);
};

struct ChainCheck {
  bool ok = true;
  std::int64_t links = 0;          // links checked
  std::int64_t first_broken_seq = 0;
  std::string table;               // of the first broken link or the first unchained row
  std::int64_t row_id = 0;
  std::int64_t experiment_id = 0;  // 0 when the row is not an experiment's
  std::string problem;             // '' when ok
  std::string head;                // hash of the last link checked (when ok: the chain's head; '' for an empty chain)
};

// The cases of one recorded gate run whose bounds a simple wrong candidate
// (wrong_candidates.h) would have passed (view gate_blind_spots).
struct BlindSpots {
  std::int64_t gate_run_id = 0;  // 0: no run of the gate judged them yet
  std::int64_t experiment_id = 0;
  std::string recorded_at;
  struct Entry {
    std::string case_label, output, candidate;
  };
  std::vector<Entry> entries;  // in case order; empty: every case could fail
};

// A tamper event as recorded (tamper_events), with the acknowledgement a
// person gave it (tamper_acknowledgements; empty fields when none yet).
struct RecordedTamper {
  std::int64_t id = 0;
  std::string detected_at;  // ISO 8601 UTC
  std::string kind;         // to_string(TamperKind)
  std::string path, detail, commit;
  std::string acknowledged_by, note, acknowledged_at;  // "" while unacknowledged
  bool acknowledged() const { return !acknowledged_by.empty(); }
};

// Another process held the write lock for longer than the lock wait.
class LedgerBusy : public InfraError {
 public:
  using InfraError::InfraError;
};

// DENSEFEED_LEDGER_BUSY_S (seconds, >= 0) when set, else 60. Throws
// InputError when it is set to something else than a number.
double default_lock_wait_s();

class Ledger {
 public:
  // audit: read-only, and opens a ledger whose schema objects differ so
  // that they can be reported.
  enum class Mode { read_write, read_only, audit };
  // read_write opens or creates the file, its folder and the schema;
  // read_only (ledger list/show) never writes and refuses a file that is not
  // a densefeed ledger. Throws InputError for a file that is not a densefeed
  // ledger (or, read-only, does not exist), InfraError when SQLite fails.
  explicit Ledger(const std::filesystem::path& path, Mode mode = Mode::read_write);
  ~Ledger();
  Ledger(const Ledger&) = delete;
  Ledger& operator=(const Ledger&) = delete;

  // Records a validated manifest with its first event: `queued` (submit) or
  // `started` by `owner` (a run). Returns the experiment id.
  std::int64_t record_experiment(const ExperimentSubmission& record, ExperimentEvent first = ExperimentEvent::started,
                                 const std::string& owner = "run");
  // Appends a state change for `experiment_id`, by this process.
  void record_event(std::int64_t experiment_id, ExperimentEvent event, const std::string& owner = "",
                    const std::string& detail = "");
  // The latest event of the experiment ("recorded" for a version-1 row with
  // none). Throws InputError when there is no such experiment.
  ExperimentState state(std::int64_t experiment_id) const;
  // Takes the oldest queued (or requeued) experiment for a worker, recording
  // `started` and its first heartbeat (interval: heartbeat_interval_s()) in
  // the same transaction, so two workers never take the same one.
  std::optional<ClaimedExperiment> claim_next(const std::string& owner);
  // Experiments whose latest event is `started` (or cancel_requested) by a
  // process that died: of this host, one whose pid and start time no longer
  // exist; of another host, one whose heartbeat `watch` has seen stand still
  // for kStaleHeartbeats of its intervals (without a watch, or for a start
  // recorded before version 4 with no heartbeat, other hosts' are left
  // alone). A worker's are requeued once, then interrupted; a run's are
  // interrupted; a cancel_requested one is cancelled. When this call waited
  // longer than 1 s for the write lock (or gave up: LedgerBusy), the owners
  // may have been kept from beating too: no heartbeat is judged this time
  // and `watch` starts its clocks again. Returns what was recorded.
  std::vector<RecoveredExperiment> recover_dead_owners(HeartbeatWatch* watch = nullptr);
  // The heartbeat row of the experiment's latest `started` event (0: none, as
  // for a start recorded before version 4).
  std::int64_t heartbeat_of(std::int64_t experiment_id) const;
  // One beat of heartbeat row `id` (by its owner): counts it and sets
  // last_beat_at, while what it keeps alive is still its owner's. Returns
  // false when it is not: another process requeued or interrupted the
  // experiment, or took its acceptance run over (nothing is written then).
  // Throws LedgerBusy like every write.
  bool beat(std::int64_t heartbeat_id);
  // The interval this connection's heartbeats are made with, s
  // (default_heartbeat_s() when it was opened).
  double heartbeat_interval_s() const { return heartbeat_s_; }
  // `densefeed cancel`: a queued experiment is cancelled at once; a started
  // one gets cancel_requested (its worker stops it). Returns the new state;
  // throws InputError when the experiment has already ended.
  ExperimentState cancel(std::int64_t experiment_id);
  // Gate run, its cases and metrics, and the gate stage's outcome in one transaction; returns the gate run id.
  std::int64_t record_gate_run(std::int64_t experiment_id, const GateRunRecord& record);
  // Bench cases and the environment in one transaction. Throws InfraError
  // carrying SQLite's message if the database refuses (e.g. the gate run is
  // not green).
  // The bench stage's outcome (bench.verdict, bench.failure) in the same
  // transaction; its cases and environment only when the bench is green (a
  // speedup of a failed benchmark is never recorded).
  void record_bench(std::int64_t experiment_id, std::int64_t gate_run_id, const BenchResult& bench,
                    const Environment& environment, const std::string& candidate_sha, const std::string& base_sha,
                    bool worktree_dirty);

  // The findings and the trace stage's outcome in one transaction.
  void record_trace_findings(std::int64_t experiment_id, std::int64_t gate_run_id,
                             const std::vector<TraceFindingRecord>& findings, const StageOutcome& outcome);
  // A stage's outcome without results (a skipped stage). Throws InputError
  // with the database's reason when it refuses (a stage recorded twice).
  void record_stage(std::int64_t experiment_id, const StageOutcome& outcome);
  // The overall verdict (the worst recorded stage: error > red > unknown >
  // green; skipped stages do not count) and `finished`, in one transaction.
  // Returns the verdict.
  std::string record_finished(std::int64_t experiment_id, const std::string& owner);
  // Throws InputError with the database's reason when a trigger refuses
  // (not declared, approval without a green gate).
  void record_review(std::int64_t experiment_id, const std::string& category, const std::string& decision,
                     const std::string& reviewer, const std::string& note);
  // Throws InputError with the database's reason when the schema refuses
  // the promotion (gate not green, a slower case, a category not approved).
  // `accepted`: what the person promoting accepts, recorded first in the same
  // transaction (bench_acceptances: "candidate_timing", "speedup_beyond_bound",
  // "agent_base");
  // the schema refuses a promotion whose benchmark needs one not given.
  // What densefeed narrow concluded about `experiment_id` (pipeline/narrow.h):
  // `layer` (one of narrowings.layer's CHECK), the sentence and the whole
  // result (schemas/narrow.schema.json), chained. Returns its id; throws
  // InputError for an unknown experiment.
  std::int64_t record_narrowing(std::int64_t experiment_id, const std::string& layer, const std::string& conclusion,
                                const nlohmann::ordered_json& result);
  std::int64_t record_promotion(std::int64_t experiment_id, const std::string& by,
                                const std::vector<std::string>& accepted = {});
  // The candidate commits (40-hex SHAs, sorted) of promoted experiments
  // whose acceptance run passed: a base at one of them is not the agent's
  // (base_origin.h, BaseOriginKind::promoted).
  std::vector<std::string> promoted_candidate_shas() const;
  // A tamper event (tamper_event.h), linked into the chain; returns its id.
  std::int64_t record_tamper(const TamperEvent& event);
  // `densefeed audit acknowledge`: a person's acknowledgement of event `id`.
  // Throws InputError naming ID when there is no such event or it was
  // acknowledged already, or `by` is empty.
  void acknowledge_tamper(std::int64_t id, const std::string& by, const std::string& note);
  // Every tamper event, oldest first (with `unacknowledged_only`: those no
  // one acknowledged yet).
  std::vector<RecordedTamper> tamper_events(bool unacknowledged_only = false) const;
  // Whether `nonce` was issued to `experiment_id` when one of its runs
  // started (run_nonces: made with every `started` event).
  bool nonce_issued(std::int64_t experiment_id, const std::string& nonce) const;
  // The nonce of the experiment's latest start ("" when it never started).
  std::string run_nonce(std::int64_t experiment_id) const;
  // HMAC-SHA256 of `message` under the ledger's key, hex (64 characters):
  // what a pending gate run is signed with (pending_results.h).
  std::string sign(const std::string& message) const;
  // A machine's ceilings (`densefeed machine calibrate`); returns the row id.
  std::int64_t record_ceilings(const MachineCeilings& m);
  // The latest ceilings measured on `host` for `device` ("cpu" or a GPU UUID).
  std::optional<MachineCeilings> latest_ceilings(const std::string& host, const std::string& device) const;
  // The acceptance stage as `started`, with its promote's first heartbeat,
  // before the command runs: a promote killed during acceptance leaves it,
  // and the next promote records it `interrupted` and runs acceptance again.
  // Returns the heartbeat row's id. Throws InputError when an earlier
  // acceptance run of the experiment is still running (its promote alive).
  std::int64_t record_acceptance_start(std::int64_t experiment_id);
  // Acceptance runs recorded `started` whose latest stage row has not ended,
  // with whether their promote still runs: the experiment's, or every one
  // (experiment_id 0), oldest first.
  std::vector<RunningAcceptance> running_acceptances(std::int64_t experiment_id = 0) const;
  // The latest acceptance stage's verdict ("" when none was recorded).
  std::string acceptance_stage(std::int64_t experiment_id) const;
  // The run, its criteria and the acceptance stage's outcome in one transaction.
  std::int64_t record_acceptance(std::int64_t experiment_id, std::int64_t promotion_id, const AcceptanceRecord& record);

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

  struct ListFilter {
    std::string gate;     // '' = any
    std::string verdict;  // gate verdict or state ('' = any)
    std::string since;    // ISO 8601 UTC prefix compared as text ('' = any)
  };
  // The typed record of every experiment that passes the filter, oldest first:
  // the one function that reads stage and overall outcomes.
  std::vector<ExperimentSummary> summaries(const ListFilter& filter = {}) const;
  // One experiment's. Throws InputError if there is no such id.
  ExperimentSummary summary(std::int64_t experiment_id) const;
  // to_json of summaries(filter).
  nlohmann::ordered_json list(const ListFilter& filter = {}) const;
  // Everything recorded for one experiment, as its rows (ledger show --json's
  // raw part; schemas/ledger-show.schema.json). Throws InputError if there is no such id.
  nlohmann::ordered_json show(std::int64_t experiment_id) const;
  // The same as the one typed record every printer reads (experiment_record.h;
  // ledger_record.cpp). Throws InputError if there is no such id.
  ExperimentRecord record(std::int64_t experiment_id) const;

  // How long a write waits for another writer's lock, s (ignored when
  // DENSEFEED_LEDGER_BUSY_S is set: the environment decides).
  void set_lock_wait(double seconds);

  // The latest gate run of `gate` that judged the simple wrong candidates,
  // and its cases where one would pass.
  BlindSpots blind_spots(const std::string& gate) const;

  // Recomputes the keyed hash chain from the recorded rows.
  ChainCheck verify() const;
  // The last link.
  ChainHead head() const;
  // '' when the chain holds `expected` as one of its links (so its history
  // extends the head recorded earlier); else what is wrong. Call after verify().
  std::string extends(const ChainHead& expected) const;
  // Tables, views, triggers and indexes that differ from the SQL compiled
  // into densefeed ("view experiment_verdicts: redefined", "trigger X:
  // missing", "table T: not densefeed's"); empty when they match.
  std::vector<std::string> schema_differences() const;
  // Promotions and acceptance runs of experiments whose overall verdict is not
  // green or whose gate, bench or trace stage is not green (possible only if
  // someone dropped the triggers, or recorded before version 3): one string each.
  std::vector<std::string> promotion_violations() const;
  // sha256 of the chain key, hex.
  const std::string& key_fingerprint() const { return key_.fingerprint; }
  // Copies the ledger to `to` with SQLite's online backup API (a consistent
  // snapshot while writers go on). Throws InfraError.
  void backup(const std::filesystem::path& to) const;
  // Benchmark, trace and acceptance rows whose experiment has no green gate
  // run (possible only if someone dropped the triggers): one string each.
  // Green gate runs (with whatever bench, trace and acceptance results hang
  // on them) whose untrusted commands ran without the sandbox: gate_runs.sandbox
  // is not "on" ("off: --no-sandbox", or an older "unavailable: ..."), one line each.
  std::vector<std::string> unsandboxed_green_results() const;
  // Green gate runs whose gates came from another ref than `trusted_ref` (a
  // branch's densefeed.yaml naming itself trusted): one line each.
  // --trust-worktree runs are a person's choice and are not listed.
  std::vector<std::string> green_results_not_from(const std::string& trusted_ref) const;
  std::vector<std::string> results_without_green_gate() const;
  // Experiments recorded without a densefeed service (same-user): those whose
  // first event's owner is not a service's "submit by LOGIN (uid N)" (a
  // densefeed run, or a submit as this machine's user), in id order.
  std::vector<std::int64_t> same_user_experiments() const;
  // Every table as {table: [rows]} (JSON columns kept as text).
  nlohmann::ordered_json export_tables() const;
  // One table's or view's column names and rows. Throws InputError when the
  // ledger has no table or view of that name.
  std::vector<std::string> columns(const std::string& table_or_view) const;
  nlohmann::ordered_json rows(const std::string& table_or_view) const;
  // Reviews of the experiment, its promotion and acceptance runs.
  nlohmann::ordered_json review_state(std::int64_t experiment_id) const;

  const std::filesystem::path& path() const { return path_; }

 private:
  // Appends the row to record_chain; call inside the transaction that inserted it.
  void link(const std::string& table, std::int64_t row_id);
  // Returns the stage row's id.
  std::int64_t insert_stage(std::int64_t experiment_id, const StageOutcome& outcome, std::optional<std::int64_t> acceptance_run = {});
  // This process's heartbeat for a started event or an acceptance stage row
  // (exactly one of them non-zero); call inside the transaction that made it.
  std::int64_t insert_heartbeat(std::int64_t experiment_id, const std::string& owner, std::int64_t started_event_id,
                                std::int64_t acceptance_stage_id);
  // A fresh nonce (16 random bytes, hex) for a started run of the
  // experiment, linked; call inside the transaction that records `started`.
  void insert_run_nonce(std::int64_t experiment_id);
  // HMAC-SHA256 under the key of prev_hash "\n" table "\n" row_id "\n" content_sha256.
  std::string link_hash(const std::string& prev, const std::string& table, std::int64_t row_id, const std::string& content) const;
  void load_key(bool create);
  // The steps of opening (ledger_open.cpp): a reader's (an old file is
  // migrated first, by a writer), and a writer's, which makes or migrates
  // the schema and the key's row in one transaction.
  void open_for_reading(Mode mode, std::int64_t version);
  void open_for_writing();
  // Takes the schema from `version` (0: an empty file) to the current one,
  // one migration at a time; call inside open_for_writing's transaction.
  void migrate_from(std::int64_t version);
  // Version 3: every link re-sealed with the key, after the version-2 chain
  // is checked (unless it was made in this transaction).
  void migrate_to_3(bool v2_links_made_here);
  std::vector<ExperimentSummary> summaries_where(const ListFilter& filter, std::int64_t only_id) const;
  std::filesystem::path path_;
  LedgerKey key_;
  double heartbeat_s_ = 10;
  sqlite3* db_ = nullptr;
};


}  // namespace densefeed
