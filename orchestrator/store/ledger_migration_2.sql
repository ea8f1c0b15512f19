-- densefeed ledger, migration 1 -> 2 (schemas/ledger.md documents every table
-- and column). Applied by Ledger on open, inside one BEGIN IMMEDIATE
-- transaction after ledger_schema.sql, for new files as for old ones, so a
-- ledger created today and one migrated from version 1 have the same shape.

-- What the manifest pre-registered, copied out of manifest_text at submission
-- so that sqlite3 users can read it (the text and its sha256 stay the record).
ALTER TABLE experiments ADD COLUMN acceptance TEXT NOT NULL DEFAULT '{}';  -- JSON: {command, statistic, criteria[]}
ALTER TABLE experiments ADD COLUMN trace TEXT NOT NULL DEFAULT '{}';       -- JSON: {command, window, checks[]}
-- How the gate's harnesses were confined: 'bubblewrap', 'off (--no-sandbox)' or 'unavailable: <why>'.
ALTER TABLE gate_runs ADD COLUMN sandbox TEXT NOT NULL DEFAULT '';
-- JSON per case: {reference|candidate: {stdout_bytes, stdout_dropped, stderr_bytes, stderr_dropped}}.
ALTER TABLE gate_cases ADD COLUMN output_capture TEXT NOT NULL DEFAULT '{}';

-- The life of an experiment, one row per change of state (append-only; the
-- state is the latest row). queued: `submit` stored it; started: a `run` or a
-- worker took it (owner_pid, owner_host, owner_start say which process);
-- requeued: its owner died and it goes back to the queue once; interrupted:
-- its owner died (again, or it was a `run`); finished: every stage ran;
-- cancel_requested / cancelled: `densefeed cancel`; rejected: a worker could
-- not prepare it (its gate or revision changed since submission; detail says how).
CREATE TABLE IF NOT EXISTS experiment_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  event TEXT NOT NULL CHECK (event IN ('queued', 'started', 'requeued', 'interrupted', 'finished',
                                       'cancel_requested', 'cancelled', 'rejected')),
  owner TEXT NOT NULL DEFAULT '',          -- 'run' or 'worker'
  owner_host TEXT NOT NULL DEFAULT '',
  owner_pid INTEGER NOT NULL DEFAULT 0,
  owner_start TEXT NOT NULL DEFAULT '',    -- the owner's start time in clock ticks since boot (/proc/PID/stat field 22)
  detail TEXT NOT NULL DEFAULT '',
  at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS experiment_events_by_experiment ON experiment_events(experiment_id, id);

-- Human review of each risk category the manifest declares. The latest row
-- per (experiment, category) is the decision.
CREATE TABLE IF NOT EXISTS reviews (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  category TEXT NOT NULL CHECK (category IN ('numerics', 'concurrency', 'architecture', 'production')),
  decision TEXT NOT NULL CHECK (decision IN ('approve', 'reject')),
  reviewer TEXT NOT NULL CHECK (length(reviewer) > 0),
  note TEXT NOT NULL DEFAULT '',
  reviewed_at TEXT NOT NULL
);

-- A green, reviewed experiment moved to its acceptance run (at most once).
CREATE TABLE IF NOT EXISTS promotions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL UNIQUE REFERENCES experiments(id),
  promoted_by TEXT NOT NULL CHECK (length(promoted_by) > 0),
  promoted_at TEXT NOT NULL
);

-- One row per trace check of a green-gated experiment.
CREATE TABLE IF NOT EXISTS trace_findings (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  gate_run_id INTEGER NOT NULL REFERENCES gate_runs(id),
  arm TEXT NOT NULL CHECK (arm IN ('candidate', 'base')),
  check_index INTEGER NOT NULL,
  kind TEXT NOT NULL,                      -- overlap | exposed | share
  check_json TEXT NOT NULL,                -- the check as the manifest wrote it
  passed INTEGER NOT NULL CHECK (passed IN (0, 1)),
  value REAL,                              -- overlap: fraction; exposed: ms; share: fraction of the window
  bound REAL,
  details TEXT NOT NULL DEFAULT '{}',      -- JSON: the intervals involved, with their times (µs from the trace's start)
  trace_file TEXT NOT NULL DEFAULT ''
);

-- The end-to-end acceptance run of a promoted experiment.
CREATE TABLE IF NOT EXISTS acceptance_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  promotion_id INTEGER NOT NULL REFERENCES promotions(id),
  verdict TEXT NOT NULL CHECK (verdict IN ('pass', 'fail', 'error')),
  reason TEXT NOT NULL DEFAULT '',
  metrics TEXT NOT NULL DEFAULT '{}',      -- JSON: metrics.json as the harness wrote it
  wall_s REAL NOT NULL,
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL
);

-- One row per pre-registered criterion of an acceptance run.
CREATE TABLE IF NOT EXISTS acceptance_criteria (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  acceptance_run_id INTEGER NOT NULL REFERENCES acceptance_runs(id),
  criterion_index INTEGER NOT NULL,
  criterion TEXT NOT NULL,                 -- as written, e.g. 'prefill_kv <= 1.05 * prefill'
  statistic TEXT NOT NULL,                 -- median | mean | p90 | ... applied to sample lists
  lhs REAL,                                -- the left side's value
  rhs REAL,                                -- the right side's value (bound, or factor times the other metric)
  passed INTEGER NOT NULL CHECK (passed IN (0, 1)),
  UNIQUE (acceptance_run_id, criterion_index)
);

-- Tamper evidence: one link per recorded row, in recording order. hash =
-- sha256(prev_hash "\n" table_name "\n" row_id "\n" content_sha256), where
-- content_sha256 is the sha256 of the row's columns (those named in
-- `columns`) as a JSON array. `densefeed ledger verify` recomputes both.
CREATE TABLE IF NOT EXISTS record_chain (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER REFERENCES experiments(id),  -- NULL only for calibrations (a machine's, not an experiment's)
  table_name TEXT NOT NULL,
  row_id INTEGER NOT NULL,
  columns TEXT NOT NULL,                   -- JSON array of the column names hashed
  content_sha256 TEXT NOT NULL CHECK (length(content_sha256) = 64),
  prev_hash TEXT NOT NULL,                 -- '' for the first link
  hash TEXT NOT NULL CHECK (length(hash) = 64),
  UNIQUE (table_name, row_id)
);

-- Invariants of the new tables.
CREATE TRIGGER IF NOT EXISTS record_chain_links_to_last BEFORE INSERT ON record_chain
WHEN NEW.prev_hash IS NOT COALESCE((SELECT hash FROM record_chain ORDER BY seq DESC LIMIT 1), '')
BEGIN SELECT RAISE(ABORT, 'record_chain: prev_hash must be the hash of the last link'); END;
CREATE TRIGGER IF NOT EXISTS record_chain_no_update BEFORE UPDATE ON record_chain
BEGIN SELECT RAISE(ABORT, 'record_chain is append-only'); END;
CREATE TRIGGER IF NOT EXISTS record_chain_no_delete BEFORE DELETE ON record_chain
BEGIN SELECT RAISE(ABORT, 'record_chain is append-only'); END;

CREATE TRIGGER IF NOT EXISTS experiment_events_need_experiment BEFORE INSERT ON experiment_events
WHEN NOT EXISTS (SELECT 1 FROM experiments WHERE id = NEW.experiment_id)
BEGIN SELECT RAISE(ABORT, 'experiment_events: no such experiment'); END;
CREATE TRIGGER IF NOT EXISTS experiment_events_no_replace BEFORE INSERT ON experiment_events
WHEN EXISTS (SELECT 1 FROM experiment_events WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'experiment_events is append-only: a row with this id exists'); END;
CREATE TRIGGER IF NOT EXISTS experiment_events_no_update BEFORE UPDATE ON experiment_events
BEGIN SELECT RAISE(ABORT, 'experiment_events is append-only'); END;
CREATE TRIGGER IF NOT EXISTS experiment_events_no_delete BEFORE DELETE ON experiment_events
BEGIN SELECT RAISE(ABORT, 'experiment_events is append-only'); END;

CREATE TRIGGER IF NOT EXISTS reviews_need_declared_category BEFORE INSERT ON reviews
WHEN NOT EXISTS (SELECT 1 FROM experiments e, json_each(e.risk) r WHERE e.id = NEW.experiment_id AND r.value = NEW.category)
BEGIN SELECT RAISE(ABORT, 'reviews: the experiment does not exist or does not declare this risk category'); END;
CREATE TRIGGER IF NOT EXISTS reviews_approve_needs_green_gate BEFORE INSERT ON reviews
WHEN NEW.decision = 'approve' AND NOT EXISTS (SELECT 1 FROM gate_runs g WHERE g.experiment_id = NEW.experiment_id AND g.verdict = 'green')
BEGIN SELECT RAISE(ABORT, 'reviews: only an experiment with a green gate run can be approved'); END;
CREATE TRIGGER IF NOT EXISTS reviews_no_replace BEFORE INSERT ON reviews
WHEN EXISTS (SELECT 1 FROM reviews WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'reviews is append-only: a row with this id exists'); END;
CREATE TRIGGER IF NOT EXISTS reviews_no_update BEFORE UPDATE ON reviews
BEGIN SELECT RAISE(ABORT, 'reviews is append-only'); END;
CREATE TRIGGER IF NOT EXISTS reviews_no_delete BEFORE DELETE ON reviews
BEGIN SELECT RAISE(ABORT, 'reviews is append-only'); END;

-- Promotion: the database itself refuses it unless the gate is green, no
-- bench case is slower, and the latest review of every declared risk
-- category approves.
CREATE TRIGGER IF NOT EXISTS promotions_need_green_gate BEFORE INSERT ON promotions
WHEN NOT EXISTS (SELECT 1 FROM gate_runs g WHERE g.experiment_id = NEW.experiment_id AND g.verdict = 'green')
BEGIN SELECT RAISE(ABORT, 'promotions: the experiment has no green gate run'); END;
CREATE TRIGGER IF NOT EXISTS promotions_need_no_slower_case BEFORE INSERT ON promotions
WHEN EXISTS (SELECT 1 FROM bench_cases b WHERE b.experiment_id = NEW.experiment_id AND b.verdict = 'slower')
BEGIN SELECT RAISE(ABORT, 'promotions: a bench case of the experiment is slower'); END;
CREATE TRIGGER IF NOT EXISTS promotions_need_approvals BEFORE INSERT ON promotions
WHEN EXISTS (SELECT 1 FROM experiments e, json_each(e.risk) r WHERE e.id = NEW.experiment_id AND
             COALESCE((SELECT v.decision FROM reviews v WHERE v.experiment_id = e.id AND v.category = r.value
                       ORDER BY v.id DESC LIMIT 1), '') <> 'approve')
BEGIN SELECT RAISE(ABORT, 'promotions: a declared risk category has no approval'); END;
CREATE TRIGGER IF NOT EXISTS promotions_no_replace BEFORE INSERT ON promotions
WHEN EXISTS (SELECT 1 FROM promotions WHERE id = NEW.id OR experiment_id = NEW.experiment_id)
BEGIN SELECT RAISE(ABORT, 'promotions is append-only: the experiment is already promoted'); END;
CREATE TRIGGER IF NOT EXISTS promotions_no_update BEFORE UPDATE ON promotions
BEGIN SELECT RAISE(ABORT, 'promotions is append-only'); END;
CREATE TRIGGER IF NOT EXISTS promotions_no_delete BEFORE DELETE ON promotions
BEGIN SELECT RAISE(ABORT, 'promotions is append-only'); END;

CREATE TRIGGER IF NOT EXISTS trace_findings_require_green_gate BEFORE INSERT ON trace_findings
WHEN NOT EXISTS (SELECT 1 FROM gate_runs g
                 WHERE g.id = NEW.gate_run_id AND g.experiment_id = NEW.experiment_id AND g.verdict = 'green')
BEGIN SELECT RAISE(ABORT, 'trace_findings: the experiment has no green gate run'); END;
CREATE TRIGGER IF NOT EXISTS trace_findings_no_replace BEFORE INSERT ON trace_findings
WHEN EXISTS (SELECT 1 FROM trace_findings WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'trace_findings is append-only: a row with this id exists'); END;
CREATE TRIGGER IF NOT EXISTS trace_findings_no_update BEFORE UPDATE ON trace_findings
BEGIN SELECT RAISE(ABORT, 'trace_findings is append-only'); END;
CREATE TRIGGER IF NOT EXISTS trace_findings_no_delete BEFORE DELETE ON trace_findings
BEGIN SELECT RAISE(ABORT, 'trace_findings is append-only'); END;

CREATE TRIGGER IF NOT EXISTS acceptance_runs_require_green_promotion BEFORE INSERT ON acceptance_runs
WHEN NOT EXISTS (SELECT 1 FROM promotions p JOIN gate_runs g ON g.experiment_id = p.experiment_id
                 WHERE p.id = NEW.promotion_id AND p.experiment_id = NEW.experiment_id AND g.verdict = 'green')
BEGIN SELECT RAISE(ABORT, 'acceptance_runs: the experiment is not promoted or its gate is not green'); END;
CREATE TRIGGER IF NOT EXISTS acceptance_runs_no_replace BEFORE INSERT ON acceptance_runs
WHEN EXISTS (SELECT 1 FROM acceptance_runs WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'acceptance_runs is append-only: a row with this id exists'); END;
CREATE TRIGGER IF NOT EXISTS acceptance_runs_no_update BEFORE UPDATE ON acceptance_runs
BEGIN SELECT RAISE(ABORT, 'acceptance_runs is append-only'); END;
CREATE TRIGGER IF NOT EXISTS acceptance_runs_no_delete BEFORE DELETE ON acceptance_runs
BEGIN SELECT RAISE(ABORT, 'acceptance_runs is append-only'); END;
CREATE TRIGGER IF NOT EXISTS acceptance_criteria_need_their_run BEFORE INSERT ON acceptance_criteria
WHEN NOT EXISTS (SELECT 1 FROM acceptance_runs WHERE id = NEW.acceptance_run_id)
BEGIN SELECT RAISE(ABORT, 'acceptance_criteria: no such acceptance run'); END;
CREATE TRIGGER IF NOT EXISTS acceptance_criteria_no_replace BEFORE INSERT ON acceptance_criteria
WHEN EXISTS (SELECT 1 FROM acceptance_criteria WHERE id = NEW.id OR
             (acceptance_run_id = NEW.acceptance_run_id AND criterion_index = NEW.criterion_index))
BEGIN SELECT RAISE(ABORT, 'acceptance_criteria is append-only: this criterion is recorded'); END;
CREATE TRIGGER IF NOT EXISTS acceptance_criteria_no_update BEFORE UPDATE ON acceptance_criteria
BEGIN SELECT RAISE(ABORT, 'acceptance_criteria is append-only'); END;
CREATE TRIGGER IF NOT EXISTS acceptance_criteria_no_delete BEFORE DELETE ON acceptance_criteria
BEGIN SELECT RAISE(ABORT, 'acceptance_criteria is append-only'); END;
-- Version 1 let an environment row exist without its experiment row only
-- through a green gate run; bench_cases and environments also need their experiment.
CREATE TRIGGER IF NOT EXISTS bench_cases_need_their_experiment BEFORE INSERT ON bench_cases
WHEN NOT EXISTS (SELECT 1 FROM experiments WHERE id = NEW.experiment_id)
BEGIN SELECT RAISE(ABORT, 'bench_cases: no such experiment'); END;

-- Views: the reviewer's usual questions.

-- The state of each experiment: its latest event ('recorded' for version-1 rows that have none).
CREATE VIEW IF NOT EXISTS experiment_states AS
SELECT e.id AS experiment_id,
       COALESCE((SELECT x.event FROM experiment_events x WHERE x.experiment_id = e.id ORDER BY x.id DESC LIMIT 1),
                'recorded') AS state
FROM experiments e;

-- The latest verdict of each experiment, stage by stage.
DROP VIEW IF EXISTS experiment_verdicts;
CREATE VIEW experiment_verdicts AS
SELECT e.id AS experiment_id, e.name, e.gate, e.author, e.submitted_at, s.state,
       COALESCE(g.verdict, 'pending') AS gate_verdict, COALESCE(g.reason, '') AS reason,
       g.profile, g.seed,
       (SELECT COUNT(*) FROM bench_cases b WHERE b.experiment_id = e.id) AS bench_cases,
       (SELECT COUNT(*) FROM bench_cases b WHERE b.experiment_id = e.id AND b.verdict = 'faster') AS bench_faster,
       (SELECT COUNT(*) FROM bench_cases b WHERE b.experiment_id = e.id AND b.verdict = 'slower') AS bench_slower,
       (SELECT COUNT(*) FROM trace_findings t WHERE t.experiment_id = e.id AND t.arm = 'candidate' AND t.passed = 0) AS trace_failed,
       (SELECT COUNT(*) FROM trace_findings t WHERE t.experiment_id = e.id) AS trace_checks,
       (SELECT a.verdict FROM acceptance_runs a WHERE a.experiment_id = e.id ORDER BY a.id DESC LIMIT 1) AS acceptance_verdict,
       EXISTS (SELECT 1 FROM promotions p WHERE p.experiment_id = e.id) AS promoted
FROM experiments e
JOIN experiment_states s ON s.experiment_id = e.id
LEFT JOIN gate_runs g ON g.experiment_id = e.id;

-- Every measured speedup of every gate over time (filter with WHERE gate = ...).
CREATE VIEW IF NOT EXISTS gate_speedups AS
SELECT g.gate, g.finished_at AS measured_at, e.id AS experiment_id, e.name AS experiment, e.candidate_sha,
       b.case_label, b.verdict, b.speedup, b.speedup_lo, b.speedup_hi, b.ci_confidence, b.predicted_speedup
FROM bench_cases b JOIN gate_runs g ON g.id = b.gate_run_id JOIN experiments e ON e.id = b.experiment_id
ORDER BY g.gate, g.finished_at, b.id;

-- Red and error gate runs grouped by what failed: the lock, a metric of an
-- output (from the first failing case's metrics), or the harness itself.
CREATE VIEW IF NOT EXISTS red_gates_by_reason AS
SELECT gate, failure, COUNT(*) AS runs, group_concat(experiment_id) AS experiment_ids
FROM (
  SELECT g.gate, g.experiment_id,
         CASE
           WHEN g.lock_problems <> '[]' THEN 'lock mismatch'
           WHEN EXISTS (SELECT 1 FROM gate_cases c JOIN gate_metrics m ON m.gate_case_id = c.id
                        WHERE c.gate_run_id = g.id AND m.passed = 0)
             THEN 'tolerance: ' || (SELECT m.output || '.' || m.metric FROM gate_cases c JOIN gate_metrics m ON m.gate_case_id = c.id
                                     WHERE c.gate_run_id = g.id AND m.passed = 0 ORDER BY c.case_index, m.id LIMIT 1)
           WHEN EXISTS (SELECT 1 FROM gate_cases c WHERE c.gate_run_id = g.id AND c.verdict <> 'green')
             THEN 'harness: ' || (SELECT CASE
                                           WHEN c.reason LIKE '%timed out%' OR c.reason LIKE '%timeout%' THEN 'timeout'
                                           WHEN c.reason LIKE '%signal%' THEN 'crash'
                                           WHEN c.reason LIKE '%exit%' THEN 'non-zero exit'
                                           WHEN c.reason LIKE '%missing%' OR c.reason LIKE '%no such%' OR c.reason LIKE '%not written%' THEN 'missing output'
                                           ELSE 'other' END
                                  FROM gate_cases c WHERE c.gate_run_id = g.id AND c.verdict <> 'green' ORDER BY c.case_index LIMIT 1)
           ELSE 'no case ran: ' || g.reason
         END AS failure
  FROM gate_runs g WHERE g.verdict <> 'green'
)
GROUP BY gate, failure
ORDER BY runs DESC;

-- Green, finished, not promoted experiments with a risk category whose latest
-- review is not an approval: what a reviewer should look at next.
CREATE VIEW IF NOT EXISTS awaiting_review AS
SELECT e.id AS experiment_id, e.name, e.gate, e.author, e.submitted_at, r.value AS category,
       COALESCE((SELECT v.decision FROM reviews v WHERE v.experiment_id = e.id AND v.category = r.value
                 ORDER BY v.id DESC LIMIT 1), 'none') AS latest_decision
FROM experiments e, json_each(e.risk) r
JOIN gate_runs g ON g.experiment_id = e.id AND g.verdict = 'green'
WHERE NOT EXISTS (SELECT 1 FROM promotions p WHERE p.experiment_id = e.id)
  AND COALESCE((SELECT v.decision FROM reviews v WHERE v.experiment_id = e.id AND v.category = r.value
                ORDER BY v.id DESC LIMIT 1), 'none') <> 'approve';
