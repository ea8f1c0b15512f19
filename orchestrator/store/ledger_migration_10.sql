-- densefeed ledger, migration 9 -> 10 (schemas/ledger.md documents every table
-- and column). Applied by Ledger on open, inside the same BEGIN IMMEDIATE
-- transaction as the earlier steps, for new files as for old ones.
--
-- What it changes (issue 29): a bench case's medians, spreads, speedup, its
-- interval and p-value may be NULL: a run interrupted before a case had two
-- rounds has no interval (and before one, no speedup), and recording its
-- rounds failed on NOT NULL (the experiment was left 'started'). SQLite
-- cannot drop a NOT NULL constraint in place, so the table is rebuilt the
-- way https://www.sqlite.org/lang_altertable.html#otheralter describes: a
-- new table, every row copied with its id, the old one dropped (with its
-- triggers), the new one renamed, and the triggers and the views that read
-- it made again as they were. Row values are unchanged, so the chain's
-- links still verify.
CREATE TABLE bench_cases_v10 (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  gate_run_id INTEGER NOT NULL REFERENCES gate_runs(id),
  case_label TEXT NOT NULL,
  case_json TEXT NOT NULL,
  unit TEXT NOT NULL,                         -- of the medians: ms
  verdict TEXT NOT NULL CHECK (verdict IN ('faster', 'slower', 'same', 'inconclusive')),
  reason TEXT NOT NULL,
  base_median REAL,                           -- over all samples of the arm; NULL: no round
  base_relative_spread REAL,                  -- IQR / median
  candidate_median REAL,
  candidate_relative_spread REAL,
  speedup REAL,                               -- exp(median over rounds of log(median(base) / median(candidate))); > 1: candidate faster; NULL: no round
  speedup_lo REAL,                            -- exp of the paired log-ratios' interval at confidence ci_confidence; NULL: fewer than 2 rounds
  speedup_hi REAL,
  ci_confidence REAL NOT NULL,                -- 1 - alpha at the deciding look
  p_value REAL,                               -- Wilcoxon signed-rank, two-sided, per-round log ratios; NULL: too few rounds
  rounds INTEGER NOT NULL,
  threshold REAL NOT NULL,                    -- noise threshold used (fraction): max(1 %, calibrated floor)
  capped INTEGER NOT NULL DEFAULT 0,          -- 1: the wall-time cap ended it
  predicted_speedup REAL,                     -- from the manifest, when given
  prediction_error REAL,                      -- speedup / predicted_speedup - 1
  rounds_json TEXT NOT NULL                   -- JSON: per round, both arms' samples (ms) and clocks
  , timing TEXT NOT NULL DEFAULT 'candidate' CHECK (timing IN ('driver', 'candidate')), timing_flags TEXT NOT NULL DEFAULT '[]', timing_checks TEXT NOT NULL DEFAULT '{}', guards TEXT
  CHECK (guards IS NULL OR json_valid(guards)));
INSERT INTO bench_cases_v10 SELECT * FROM bench_cases;
DROP VIEW gate_speedups;
DROP VIEW experiment_verdicts;
DROP TABLE bench_cases;
-- legacy_alter_table: the rename leaves the triggers on promotions that read
-- bench_cases as they are (they name the table by the name it ends with).
PRAGMA legacy_alter_table = ON;
ALTER TABLE bench_cases_v10 RENAME TO bench_cases;
PRAGMA legacy_alter_table = OFF;
CREATE TRIGGER bench_cases_require_green_gate
BEFORE INSERT ON bench_cases
WHEN NOT EXISTS (SELECT 1 FROM gate_runs g
                 WHERE g.id = NEW.gate_run_id AND g.experiment_id = NEW.experiment_id AND g.verdict = 'green')
BEGIN
  SELECT RAISE(ABORT, 'bench_cases: the experiment has no green gate run; a speedup is never recorded on a red gate');
END;
CREATE TRIGGER bench_cases_no_replace BEFORE INSERT ON bench_cases
WHEN EXISTS (SELECT 1 FROM bench_cases WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'bench_cases is append-only: a row with this id exists'); END;
CREATE TRIGGER bench_cases_no_update BEFORE UPDATE ON bench_cases
BEGIN SELECT RAISE(ABORT, 'bench_cases is append-only'); END;
CREATE TRIGGER bench_cases_no_delete BEFORE DELETE ON bench_cases
BEGIN SELECT RAISE(ABORT, 'bench_cases is append-only'); END;
CREATE TRIGGER bench_cases_need_their_experiment BEFORE INSERT ON bench_cases
WHEN NOT EXISTS (SELECT 1 FROM experiments WHERE id = NEW.experiment_id)
BEGIN SELECT RAISE(ABORT, 'bench_cases: no such experiment'); END;
CREATE VIEW gate_speedups AS
SELECT g.gate, g.finished_at AS measured_at, e.id AS experiment_id, e.name AS experiment, e.candidate_sha,
       b.case_label, b.verdict, b.speedup, b.speedup_lo, b.speedup_hi, b.ci_confidence, b.predicted_speedup
FROM bench_cases b JOIN gate_runs g ON g.id = b.gate_run_id JOIN experiments e ON e.id = b.experiment_id
ORDER BY g.gate, g.finished_at, b.id;
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
