-- densefeed ledger, schema version 2 (schemas/ledger.md documents every table
-- and column). Read it with nothing but sqlite3.
-- Times are ISO 8601 UTC text; durations are seconds (REAL); benchmark
-- figures are in the unit column (ms). Results are append-only and the
-- database, not the application, refuses a speedup for a gate that is not green.

CREATE TABLE IF NOT EXISTS schema_info (
  version INTEGER NOT NULL
);

-- One row per submitted experiment that passed validation.
CREATE TABLE IF NOT EXISTS experiments (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  manifest_path TEXT NOT NULL,
  manifest_text TEXT NOT NULL,
  manifest_sha256 TEXT NOT NULL CHECK (length(manifest_sha256) = 64),
  author TEXT NOT NULL DEFAULT '',
  hypothesis TEXT NOT NULL,
  predicted_effect TEXT NOT NULL,
  gate TEXT NOT NULL,
  risk TEXT NOT NULL DEFAULT '[]',            -- JSON array of risk categories
  candidate_revision TEXT NOT NULL,
  candidate_params TEXT NOT NULL,             -- JSON object, completed with the gate's defaults
  base_revision TEXT NOT NULL,
  base_params TEXT NOT NULL,
  submitted_at TEXT NOT NULL,
  candidate_sha TEXT NOT NULL DEFAULT '',     -- the commit run (WORKTREE: HEAD, see worktree_dirty); '' outside git
  base_sha TEXT NOT NULL DEFAULT '',
  worktree_dirty INTEGER NOT NULL DEFAULT 0   -- 1: densefeed's checkout had uncommitted changes to tracked files
);

-- The gate stage of an experiment (one per experiment).
CREATE TABLE IF NOT EXISTS gate_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL UNIQUE REFERENCES experiments(id),
  gate TEXT NOT NULL,
  gate_sha256 TEXT NOT NULL,                  -- of the gate file as run
  lock_problems TEXT NOT NULL DEFAULT '[]',   -- JSON array; non-empty means red before any case ran
  profile TEXT NOT NULL,
  seed TEXT NOT NULL,                         -- u64 in decimal (SQLite integers are signed)
  verdict TEXT NOT NULL CHECK (verdict IN ('green', 'red', 'error')),
  reason TEXT NOT NULL DEFAULT '',
  wall_s REAL NOT NULL,                       -- the whole stage
  harness_wall_s REAL NOT NULL,               -- sum over harness processes
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL,
  -- JSON: {root, commit, clean, uncommitted[], harness_sha256{}}: whether the
  -- gate, lock and frozen files were densefeed's committed ones, and which
  -- harness binaries ran. clean = false deserves a reviewer's look.
  provenance TEXT NOT NULL DEFAULT '{}'
);

CREATE TABLE IF NOT EXISTS gate_cases (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  gate_run_id INTEGER NOT NULL REFERENCES gate_runs(id),
  case_index INTEGER NOT NULL,
  case_label TEXT NOT NULL,
  case_json TEXT NOT NULL,
  verdict TEXT NOT NULL CHECK (verdict IN ('green', 'red', 'error')),
  reason TEXT NOT NULL DEFAULT '',
  reference_wall_s REAL NOT NULL,             -- 0 when the reference run was shared with an earlier case
  candidate_wall_s REAL NOT NULL,
  UNIQUE (gate_run_id, case_index)
);

-- One row per (case, output, metric).
CREATE TABLE IF NOT EXISTS gate_metrics (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  gate_case_id INTEGER NOT NULL REFERENCES gate_cases(id),
  output TEXT NOT NULL,
  metric TEXT NOT NULL CHECK (metric IN ('rel_l2', 'max_abs', 'elementwise', 'max_ulp')),
  value REAL,                                 -- NULL when NaN; elementwise: fraction of elements violating
  bound REAL NOT NULL,
  passed INTEGER NOT NULL CHECK (passed IN (0, 1)),
  violations INTEGER NOT NULL DEFAULT 0,      -- elements beyond an elementwise bound (max_abs, elementwise, max_ulp)
  judged_relative INTEGER NOT NULL DEFAULT 0, -- 1: the reference was below the absolute bound, judged by relative error
  worst_index TEXT NOT NULL DEFAULT '[]',     -- JSON multi-index of the largest |candidate - reference|
  first_failing_slice INTEGER                 -- along the output's partition axis, when declared and failing
);

-- Benchmark results: exist only for an experiment whose gate run is green.
-- One row per bench case: the sequential decision over interleaved rounds.
CREATE TABLE IF NOT EXISTS bench_cases (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  gate_run_id INTEGER NOT NULL REFERENCES gate_runs(id),
  case_label TEXT NOT NULL,
  case_json TEXT NOT NULL,
  unit TEXT NOT NULL,                         -- of the medians: ms
  verdict TEXT NOT NULL CHECK (verdict IN ('faster', 'slower', 'same', 'inconclusive')),
  reason TEXT NOT NULL,
  base_median REAL NOT NULL,                  -- over all samples of the arm
  base_relative_spread REAL NOT NULL,         -- IQR / median
  candidate_median REAL NOT NULL,
  candidate_relative_spread REAL NOT NULL,
  speedup REAL NOT NULL,                      -- exp(median over rounds of log(median(base) / median(candidate))); > 1: candidate faster
  speedup_lo REAL NOT NULL,                   -- bootstrap interval of that median, at confidence ci_confidence
  speedup_hi REAL NOT NULL,
  ci_confidence REAL NOT NULL,                -- 1 - alpha at the deciding look
  p_value REAL NOT NULL,                      -- Wilcoxon signed-rank, two-sided, per-round log ratios
  rounds INTEGER NOT NULL,
  threshold REAL NOT NULL,                    -- noise threshold used (fraction): max(1 %, calibrated floor)
  capped INTEGER NOT NULL DEFAULT 0,          -- 1: the wall-time cap ended it
  predicted_speedup REAL,                     -- from the manifest, when given
  prediction_error REAL,                      -- speedup / predicted_speedup - 1
  rounds_json TEXT NOT NULL                   -- JSON: per round, both arms' samples (ms) and clocks
);

-- The machine and build of each benchmarked experiment.
CREATE TABLE IF NOT EXISTS environments (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  host TEXT NOT NULL,
  cpu_model TEXT NOT NULL,
  gpus TEXT NOT NULL,                         -- JSON array of {name, uuid, driver} from nvidia-smi; [] without one
  cuda_version TEXT NOT NULL,                 -- nvcc's release, '' without one
  compiler TEXT NOT NULL,                     -- densefeed's build: compiler id and version
  flags TEXT NOT NULL,                        -- and its flags
  candidate_sha TEXT NOT NULL,
  base_sha TEXT NOT NULL,
  worktree_dirty INTEGER NOT NULL,
  clocks TEXT NOT NULL DEFAULT '{}'           -- JSON: SM clocks the harnesses reported (median per arm), MHz
);

-- Noise floors measured by `densefeed bench calibrate`: the base against
-- itself, on one host; later decisions use the latest floor as threshold.
CREATE TABLE IF NOT EXISTS calibrations (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  gate TEXT NOT NULL,
  gate_sha256 TEXT NOT NULL,
  case_label TEXT NOT NULL,
  host TEXT NOT NULL,
  params TEXT NOT NULL,                       -- JSON: the parameters both arms ran with
  comparisons INTEGER NOT NULL,
  noise_floor REAL NOT NULL,                  -- 95th percentile of |speedup - 1| over the A/A comparisons
  false_verdict_rate REAL NOT NULL,           -- fraction of A/A comparisons that ended faster or slower
  verdicts TEXT NOT NULL,                     -- JSON: each comparison's verdict and speedup
  created_at TEXT NOT NULL
);

CREATE TRIGGER IF NOT EXISTS bench_cases_require_green_gate
BEFORE INSERT ON bench_cases
WHEN NOT EXISTS (SELECT 1 FROM gate_runs g
                 WHERE g.id = NEW.gate_run_id AND g.experiment_id = NEW.experiment_id AND g.verdict = 'green')
BEGIN
  SELECT RAISE(ABORT, 'bench_cases: the experiment has no green gate run; a speedup is never recorded on a red gate');
END;

-- INSERT OR REPLACE would delete a conflicting row without firing the delete
-- triggers below (SQLite fires them only with recursive_triggers on), so an
-- insert that conflicts with a recorded row is refused before it can replace it.
CREATE TRIGGER IF NOT EXISTS experiments_no_replace BEFORE INSERT ON experiments
WHEN EXISTS (SELECT 1 FROM experiments WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'experiments is append-only: a row with this id exists'); END;
CREATE TRIGGER IF NOT EXISTS gate_runs_no_replace BEFORE INSERT ON gate_runs
WHEN EXISTS (SELECT 1 FROM gate_runs WHERE id = NEW.id OR experiment_id = NEW.experiment_id)
BEGIN SELECT RAISE(ABORT, 'gate_runs is append-only: this experiment already has a gate run'); END;
CREATE TRIGGER IF NOT EXISTS gate_cases_no_replace BEFORE INSERT ON gate_cases
WHEN EXISTS (SELECT 1 FROM gate_cases WHERE id = NEW.id OR (gate_run_id = NEW.gate_run_id AND case_index = NEW.case_index))
BEGIN SELECT RAISE(ABORT, 'gate_cases is append-only: this case is recorded'); END;
CREATE TRIGGER IF NOT EXISTS gate_cases_need_their_run BEFORE INSERT ON gate_cases
WHEN NOT EXISTS (SELECT 1 FROM gate_runs WHERE id = NEW.gate_run_id)
BEGIN SELECT RAISE(ABORT, 'gate_cases: no such gate run'); END;
CREATE TRIGGER IF NOT EXISTS gate_metrics_no_replace BEFORE INSERT ON gate_metrics
WHEN EXISTS (SELECT 1 FROM gate_metrics WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'gate_metrics is append-only: a row with this id exists'); END;
CREATE TRIGGER IF NOT EXISTS gate_metrics_need_their_case BEFORE INSERT ON gate_metrics
WHEN NOT EXISTS (SELECT 1 FROM gate_cases WHERE id = NEW.gate_case_id)
BEGIN SELECT RAISE(ABORT, 'gate_metrics: no such gate case'); END;
CREATE TRIGGER IF NOT EXISTS gate_runs_need_their_experiment BEFORE INSERT ON gate_runs
WHEN NOT EXISTS (SELECT 1 FROM experiments WHERE id = NEW.experiment_id)
BEGIN SELECT RAISE(ABORT, 'gate_runs: no such experiment'); END;
CREATE TRIGGER IF NOT EXISTS bench_cases_no_replace BEFORE INSERT ON bench_cases
WHEN EXISTS (SELECT 1 FROM bench_cases WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'bench_cases is append-only: a row with this id exists'); END;

CREATE TRIGGER IF NOT EXISTS experiments_no_update BEFORE UPDATE ON experiments
BEGIN SELECT RAISE(ABORT, 'experiments is append-only'); END;
CREATE TRIGGER IF NOT EXISTS experiments_no_delete BEFORE DELETE ON experiments
BEGIN SELECT RAISE(ABORT, 'experiments is append-only'); END;
CREATE TRIGGER IF NOT EXISTS gate_runs_no_update BEFORE UPDATE ON gate_runs
BEGIN SELECT RAISE(ABORT, 'gate_runs is append-only'); END;
CREATE TRIGGER IF NOT EXISTS gate_runs_no_delete BEFORE DELETE ON gate_runs
BEGIN SELECT RAISE(ABORT, 'gate_runs is append-only'); END;
CREATE TRIGGER IF NOT EXISTS gate_cases_no_update BEFORE UPDATE ON gate_cases
BEGIN SELECT RAISE(ABORT, 'gate_cases is append-only'); END;
CREATE TRIGGER IF NOT EXISTS gate_cases_no_delete BEFORE DELETE ON gate_cases
BEGIN SELECT RAISE(ABORT, 'gate_cases is append-only'); END;
CREATE TRIGGER IF NOT EXISTS gate_metrics_no_update BEFORE UPDATE ON gate_metrics
BEGIN SELECT RAISE(ABORT, 'gate_metrics is append-only'); END;
CREATE TRIGGER IF NOT EXISTS gate_metrics_no_delete BEFORE DELETE ON gate_metrics
BEGIN SELECT RAISE(ABORT, 'gate_metrics is append-only'); END;
CREATE TRIGGER IF NOT EXISTS environments_need_green_gate BEFORE INSERT ON environments
WHEN NOT EXISTS (SELECT 1 FROM gate_runs g WHERE g.experiment_id = NEW.experiment_id AND g.verdict = 'green')
BEGIN SELECT RAISE(ABORT, 'environments: recorded only with a benchmark, which needs a green gate run'); END;
CREATE TRIGGER IF NOT EXISTS environments_no_update BEFORE UPDATE ON environments
BEGIN SELECT RAISE(ABORT, 'environments is append-only'); END;
CREATE TRIGGER IF NOT EXISTS environments_no_delete BEFORE DELETE ON environments
BEGIN SELECT RAISE(ABORT, 'environments is append-only'); END;
CREATE TRIGGER IF NOT EXISTS calibrations_no_replace BEFORE INSERT ON calibrations
WHEN EXISTS (SELECT 1 FROM calibrations WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'calibrations is append-only: a row with this id exists'); END;
CREATE TRIGGER IF NOT EXISTS environments_no_replace BEFORE INSERT ON environments
WHEN EXISTS (SELECT 1 FROM environments WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'environments is append-only: a row with this id exists'); END;
CREATE TRIGGER IF NOT EXISTS schema_info_no_update BEFORE UPDATE ON schema_info
BEGIN SELECT RAISE(ABORT, 'schema_info changes only through densefeed migrations'); END;
CREATE TRIGGER IF NOT EXISTS schema_info_no_delete BEFORE DELETE ON schema_info
BEGIN SELECT RAISE(ABORT, 'schema_info changes only through densefeed migrations'); END;
CREATE TRIGGER IF NOT EXISTS calibrations_no_update BEFORE UPDATE ON calibrations
BEGIN SELECT RAISE(ABORT, 'calibrations is append-only'); END;
CREATE TRIGGER IF NOT EXISTS calibrations_no_delete BEFORE DELETE ON calibrations
BEGIN SELECT RAISE(ABORT, 'calibrations is append-only'); END;
CREATE TRIGGER IF NOT EXISTS bench_cases_no_update BEFORE UPDATE ON bench_cases
BEGIN SELECT RAISE(ABORT, 'bench_cases is append-only'); END;
CREATE TRIGGER IF NOT EXISTS bench_cases_no_delete BEFORE DELETE ON bench_cases
BEGIN SELECT RAISE(ABORT, 'bench_cases is append-only'); END;

-- The latest verdict of each experiment ('pending' while its gate has not finished).
CREATE VIEW IF NOT EXISTS experiment_verdicts AS
SELECT e.id AS experiment_id, e.name, e.gate, e.submitted_at,
       COALESCE(g.verdict, 'pending') AS gate_verdict, COALESCE(g.reason, '') AS reason,
       g.profile, g.seed,
       (SELECT COUNT(*) FROM bench_cases b WHERE b.experiment_id = e.id) AS bench_cases
FROM experiments e LEFT JOIN gate_runs g ON g.experiment_id = e.id;
