-- densefeed ledger, migration 2 -> 3 (schemas/ledger.md documents every table
-- and column). Applied by Ledger on open, inside the same BEGIN IMMEDIATE
-- transaction as the earlier steps, for new files as for old ones.
--
-- What it adds: every stage's outcome as a row (stage_outcomes), the
-- experiment's overall verdict as a row (experiment_outcomes), failures as
-- typed columns, promotion refused by the database unless every stage that
-- ran is green, and the key that links the chain (chain_keys).

-- How a case failed, as a value (orchestrator/failure.h). '' in rows
-- recorded before version 3: not recorded.
ALTER TABLE gate_cases ADD COLUMN failure_kind TEXT NOT NULL DEFAULT '';  -- none | crash | exit_code | timeout | no_start | missing_output | malformed_output | tolerance | trend | lock | sandbox | limit | infrastructure
ALTER TABLE gate_cases ADD COLUMN failure_who TEXT NOT NULL DEFAULT '';   -- reference | candidate | base | driver | densefeed
ALTER TABLE gate_cases ADD COLUMN failure_signal INTEGER;                 -- crash: the signal number
ALTER TABLE gate_cases ADD COLUMN failure_exit_code INTEGER;              -- exit_code: the code
ALTER TABLE gate_cases ADD COLUMN failure_output TEXT NOT NULL DEFAULT '';-- missing/malformed/tolerance: the output
ALTER TABLE gate_cases ADD COLUMN failure_metric TEXT NOT NULL DEFAULT '';-- tolerance, trend: the metric (rel_l2, max_abs, elementwise, max_ulp, slice)
-- Could the case have failed? The simple wrong candidates (zeros,
-- reference_mean, last_partition_zeroed; orchestrator/wrong_candidates.h)
-- that the case's bounds would have accepted against its reference, judged
-- at no harness cost: a JSON array of {"output", "candidate"}; '[]' when
-- none would pass; '' when not judged (recorded before version 3, or the
-- candidate's process failed before any output was compared).
ALTER TABLE gate_cases ADD COLUMN passing_wrong_candidates TEXT NOT NULL DEFAULT '';

-- One row per stage of an experiment that was reached: gate, bench, trace
-- (each at most once) and acceptance (once per acceptance run: a killed one
-- is 'interrupted' and a person may run it again). verdict: green | red |
-- error; skipped (the stage did not run: reason says why); unknown (the
-- experiment was recorded before version 3 and this stage's outcome was not
-- kept); started (acceptance only: recorded before it runs, so a killed
-- acceptance leaves a trace); interrupted (acceptance killed before its end).
CREATE TABLE IF NOT EXISTS stage_outcomes (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  stage TEXT NOT NULL CHECK (stage IN ('gate', 'bench', 'trace', 'acceptance')),
  verdict TEXT NOT NULL CHECK (verdict IN ('green', 'red', 'error', 'skipped', 'unknown', 'started', 'interrupted')),
  failure_kind TEXT NOT NULL DEFAULT 'none',
  failure_who TEXT NOT NULL DEFAULT '',
  failure_signal INTEGER,
  failure_exit_code INTEGER,
  failure_output TEXT NOT NULL DEFAULT '',
  failure_metric TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '',
  wall_s REAL,                               -- the stage's wall time, s (NULL: not measured)
  acceptance_run_id INTEGER REFERENCES acceptance_runs(id),  -- acceptance: the run it ended as
  recorded_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS stage_outcomes_by_experiment ON stage_outcomes(experiment_id, stage, id);

-- The experiment's overall verdict, once, when its last stage has been
-- recorded: the worst stage (error > red > unknown > green; skipped stages
-- do not count). stage names the stage that decided it ('' when green).
CREATE TABLE IF NOT EXISTS experiment_outcomes (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL UNIQUE REFERENCES experiments(id),
  verdict TEXT NOT NULL CHECK (verdict IN ('green', 'red', 'error', 'unknown')),
  stage TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '',
  recorded_at TEXT NOT NULL
);

-- The key that links record_chain (HMAC-SHA256): its fingerprint (sha256 of
-- the key, hex). Migration 3 re-sealed every earlier link with it, so every
-- link is keyed. The key itself lives outside the ledger (densefeed.yaml
-- ledger_key, or ~/.config/densefeed/keys/).
CREATE TABLE IF NOT EXISTS chain_keys (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  fingerprint TEXT NOT NULL CHECK (length(fingerprint) = 64),
  created_at TEXT NOT NULL
);

CREATE TRIGGER IF NOT EXISTS stage_outcomes_need_experiment BEFORE INSERT ON stage_outcomes
WHEN NOT EXISTS (SELECT 1 FROM experiments WHERE id = NEW.experiment_id)
BEGIN SELECT RAISE(ABORT, 'stage_outcomes: no such experiment'); END;
CREATE TRIGGER IF NOT EXISTS stage_outcomes_once_per_stage BEFORE INSERT ON stage_outcomes
WHEN NEW.stage <> 'acceptance' AND EXISTS (SELECT 1 FROM stage_outcomes s WHERE s.experiment_id = NEW.experiment_id AND s.stage = NEW.stage)
BEGIN SELECT RAISE(ABORT, 'stage_outcomes: this stage of the experiment is recorded'); END;
CREATE TRIGGER IF NOT EXISTS stage_outcomes_no_replace BEFORE INSERT ON stage_outcomes
WHEN EXISTS (SELECT 1 FROM stage_outcomes WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'stage_outcomes is append-only: a row with this id exists'); END;
CREATE TRIGGER IF NOT EXISTS stage_outcomes_no_update BEFORE UPDATE ON stage_outcomes
BEGIN SELECT RAISE(ABORT, 'stage_outcomes is append-only'); END;
CREATE TRIGGER IF NOT EXISTS stage_outcomes_no_delete BEFORE DELETE ON stage_outcomes
BEGIN SELECT RAISE(ABORT, 'stage_outcomes is append-only'); END;
-- A green bench or trace stage needs a green gate stage (a speedup is never
-- measured on a red gate).
CREATE TRIGGER IF NOT EXISTS stage_outcomes_need_green_gate BEFORE INSERT ON stage_outcomes
WHEN NEW.stage IN ('bench', 'trace', 'acceptance') AND NEW.verdict NOT IN ('skipped', 'unknown') AND NOT EXISTS
     (SELECT 1 FROM stage_outcomes g WHERE g.experiment_id = NEW.experiment_id AND g.stage = 'gate' AND g.verdict = 'green')
BEGIN SELECT RAISE(ABORT, 'stage_outcomes: a bench, trace or acceptance outcome needs a green gate stage'); END;

CREATE TRIGGER IF NOT EXISTS experiment_outcomes_no_replace BEFORE INSERT ON experiment_outcomes
WHEN EXISTS (SELECT 1 FROM experiment_outcomes WHERE id = NEW.id OR experiment_id = NEW.experiment_id)
BEGIN SELECT RAISE(ABORT, 'experiment_outcomes is append-only: the experiment has its verdict'); END;
CREATE TRIGGER IF NOT EXISTS experiment_outcomes_no_update BEFORE UPDATE ON experiment_outcomes
BEGIN SELECT RAISE(ABORT, 'experiment_outcomes is append-only'); END;
CREATE TRIGGER IF NOT EXISTS experiment_outcomes_no_delete BEFORE DELETE ON experiment_outcomes
BEGIN SELECT RAISE(ABORT, 'experiment_outcomes is append-only'); END;
-- The overall verdict cannot be greener than its stages.
CREATE TRIGGER IF NOT EXISTS experiment_outcomes_green_needs_green_stages BEFORE INSERT ON experiment_outcomes
WHEN NEW.verdict = 'green' AND (
       NOT EXISTS (SELECT 1 FROM stage_outcomes s WHERE s.experiment_id = NEW.experiment_id AND s.stage = 'gate' AND s.verdict = 'green')
       OR EXISTS (SELECT 1 FROM stage_outcomes s WHERE s.experiment_id = NEW.experiment_id AND s.stage IN ('bench', 'trace')
                  AND s.verdict NOT IN ('green', 'skipped')))
BEGIN SELECT RAISE(ABORT, 'experiment_outcomes: green needs a green gate stage and every bench and trace stage that ran green'); END;

CREATE TRIGGER IF NOT EXISTS chain_keys_no_update BEFORE UPDATE ON chain_keys
BEGIN SELECT RAISE(ABORT, 'chain_keys is append-only'); END;
CREATE TRIGGER IF NOT EXISTS chain_keys_no_delete BEFORE DELETE ON chain_keys
BEGIN SELECT RAISE(ABORT, 'chain_keys is append-only'); END;

-- Promotion: the database refuses it unless the experiment's overall verdict
-- is green, which needs its gate green and every bench and trace stage that
-- ran green (a red or errored benchmark, a failed or unreadable trace, or a
-- stage whose outcome is unknown is refused).
CREATE TRIGGER IF NOT EXISTS promotions_need_green_bench_stage BEFORE INSERT ON promotions
WHEN EXISTS (SELECT 1 FROM stage_outcomes s WHERE s.experiment_id = NEW.experiment_id AND s.stage = 'bench'
             AND s.verdict NOT IN ('green', 'skipped'))
BEGIN SELECT RAISE(ABORT, 'promotions: the experiment''s bench stage is not green (red, error or unknown)'); END;
CREATE TRIGGER IF NOT EXISTS promotions_need_green_trace_stage BEFORE INSERT ON promotions
WHEN EXISTS (SELECT 1 FROM stage_outcomes s WHERE s.experiment_id = NEW.experiment_id AND s.stage = 'trace'
             AND s.verdict NOT IN ('green', 'skipped'))
BEGIN SELECT RAISE(ABORT, 'promotions: the experiment''s trace stage is not green (a failed check, an unreadable trace, or unknown)'); END;
CREATE TRIGGER IF NOT EXISTS promotions_need_green_outcome BEFORE INSERT ON promotions
WHEN NOT EXISTS (SELECT 1 FROM experiment_outcomes o WHERE o.experiment_id = NEW.experiment_id AND o.verdict = 'green')
BEGIN SELECT RAISE(ABORT, 'promotions: the experiment has no green overall verdict (not finished, or a stage is not green)'); END;

-- A second acceptance run is allowed only after an interrupted one.
CREATE TRIGGER IF NOT EXISTS acceptance_runs_once_unless_interrupted BEFORE INSERT ON acceptance_runs
WHEN EXISTS (SELECT 1 FROM acceptance_runs a WHERE a.experiment_id = NEW.experiment_id)
BEGIN SELECT RAISE(ABORT, 'acceptance_runs: the experiment has its acceptance run'); END;

-- Experiments recorded before version 3: their gate stage is what gate_runs
-- holds; their bench and trace stages were not recorded when they were red,
-- so they are unknown (never green), or skipped when the manifest had no
-- trace section; the overall verdict is the gate's when it is not green,
-- else unknown. Only experiments that had ended get an overall verdict.
INSERT INTO stage_outcomes(experiment_id, stage, verdict, failure_kind, reason, wall_s, recorded_at)
SELECT g.experiment_id, 'gate', g.verdict, CASE WHEN g.verdict = 'green' THEN 'none' ELSE 'unknown' END, g.reason, g.wall_s,
       g.finished_at
FROM gate_runs g WHERE NOT EXISTS (SELECT 1 FROM stage_outcomes s WHERE s.experiment_id = g.experiment_id)
ORDER BY g.experiment_id;
INSERT INTO stage_outcomes(experiment_id, stage, verdict, failure_kind, reason, recorded_at)
SELECT g.experiment_id, 'bench', 'unknown', 'unknown',
       'recorded before ledger version 3, which did not keep a red or errored benchmark''s outcome', g.finished_at
FROM gate_runs g WHERE g.verdict = 'green' AND NOT EXISTS (SELECT 1 FROM stage_outcomes s WHERE s.experiment_id = g.experiment_id AND s.stage = 'bench')
ORDER BY g.experiment_id;
INSERT INTO stage_outcomes(experiment_id, stage, verdict, failure_kind, reason, recorded_at)
SELECT g.experiment_id, 'trace',
       CASE WHEN e.trace = '{}' THEN 'skipped' ELSE 'unknown' END,
       CASE WHEN e.trace = '{}' THEN 'none' ELSE 'unknown' END,
       CASE WHEN e.trace = '{}' THEN 'the manifest has no trace section'
            ELSE 'recorded before ledger version 3, which did not keep a failed or unreadable trace''s outcome' END,
       g.finished_at
FROM gate_runs g JOIN experiments e ON e.id = g.experiment_id
WHERE g.verdict = 'green' AND NOT EXISTS (SELECT 1 FROM stage_outcomes s WHERE s.experiment_id = g.experiment_id AND s.stage = 'trace')
ORDER BY g.experiment_id;
INSERT INTO stage_outcomes(experiment_id, stage, verdict, failure_kind, reason, wall_s, acceptance_run_id, recorded_at)
SELECT a.experiment_id, 'acceptance', CASE a.verdict WHEN 'pass' THEN 'green' WHEN 'fail' THEN 'red' ELSE 'error' END,
       CASE a.verdict WHEN 'pass' THEN 'none' ELSE 'unknown' END, a.reason, a.wall_s, a.id, a.finished_at
FROM acceptance_runs a WHERE NOT EXISTS (SELECT 1 FROM stage_outcomes s WHERE s.acceptance_run_id = a.id)
ORDER BY a.id;
INSERT INTO experiment_outcomes(experiment_id, verdict, stage, reason, recorded_at)
SELECT g.experiment_id, CASE WHEN g.verdict = 'green' THEN 'unknown' ELSE g.verdict END,
       CASE WHEN g.verdict = 'green' THEN 'bench' ELSE 'gate' END,
       CASE WHEN g.verdict = 'green' THEN 'recorded before ledger version 3: the bench and trace outcomes are unknown' ELSE g.reason END,
       g.finished_at
FROM gate_runs g JOIN experiment_states s ON s.experiment_id = g.experiment_id
WHERE s.state IN ('finished', 'recorded') AND NOT EXISTS (SELECT 1 FROM experiment_outcomes o WHERE o.experiment_id = g.experiment_id)
ORDER BY g.experiment_id;

-- The latest verdict of each experiment, stage by stage; verdict is the
-- overall one ('pending' until the experiment has one).
DROP VIEW IF EXISTS experiment_verdicts;
CREATE VIEW experiment_verdicts AS
SELECT e.id AS experiment_id, e.name, e.gate, e.author, e.submitted_at, s.state,
       COALESCE(o.verdict, 'pending') AS verdict, COALESCE(o.stage, '') AS verdict_stage,
       COALESCE(g.verdict, 'pending') AS gate_verdict,
       COALESCE(CASE WHEN o.verdict IS NOT NULL AND o.verdict <> 'green' THEN o.reason END, g.reason, '') AS reason,
       g.profile, g.seed,
       (SELECT x.verdict FROM stage_outcomes x WHERE x.experiment_id = e.id AND x.stage = 'bench' ORDER BY x.id DESC LIMIT 1) AS bench_verdict,
       (SELECT x.verdict FROM stage_outcomes x WHERE x.experiment_id = e.id AND x.stage = 'trace' ORDER BY x.id DESC LIMIT 1) AS trace_verdict,
       (SELECT COUNT(*) FROM bench_cases b WHERE b.experiment_id = e.id) AS bench_cases,
       (SELECT COUNT(*) FROM bench_cases b WHERE b.experiment_id = e.id AND b.verdict = 'faster') AS bench_faster,
       (SELECT COUNT(*) FROM bench_cases b WHERE b.experiment_id = e.id AND b.verdict = 'slower') AS bench_slower,
       (SELECT COUNT(*) FROM trace_findings t WHERE t.experiment_id = e.id AND t.arm = 'candidate' AND t.passed = 0) AS trace_failed,
       (SELECT COUNT(*) FROM trace_findings t WHERE t.experiment_id = e.id) AS trace_checks,
       (SELECT a.verdict FROM acceptance_runs a WHERE a.experiment_id = e.id ORDER BY a.id DESC LIMIT 1) AS acceptance_verdict,
       EXISTS (SELECT 1 FROM promotions p WHERE p.experiment_id = e.id) AS promoted
FROM experiments e
JOIN experiment_states s ON s.experiment_id = e.id
LEFT JOIN gate_runs g ON g.experiment_id = e.id
LEFT JOIN experiment_outcomes o ON o.experiment_id = e.id;

-- Cases whose bounds a simple wrong candidate would pass, one row per case,
-- output and candidate: what `gate show` and the run report print as "this
-- case cannot tell a zero output from the reference". The gate's owner
-- tightens its bounds.
DROP VIEW IF EXISTS gate_blind_spots;
CREATE VIEW gate_blind_spots AS
SELECT g.gate, g.id AS gate_run_id, g.experiment_id, g.finished_at, c.case_index, c.case_label,
       json_extract(j.value, '$.output') AS output, json_extract(j.value, '$.candidate') AS candidate
FROM gate_cases c JOIN gate_runs g ON g.id = c.gate_run_id,
     json_each(CASE WHEN c.passing_wrong_candidates = '' THEN '[]' ELSE c.passing_wrong_candidates END) j;
