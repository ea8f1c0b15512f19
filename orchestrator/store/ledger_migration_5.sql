-- densefeed ledger, migration 4 -> 5 (schemas/ledger.md documents every table
-- and column). Applied by Ledger on open, inside the same BEGIN IMMEDIATE
-- transaction as the earlier steps, for new files as for old ones.
--
-- What it adds (issue 16, speedups the candidate cannot forge): who took each
-- bench case's samples, densefeed's own cross-checks of them, the machine's
-- measured ceilings, and a person's acceptance of what the checks cannot
-- settle, which promotion then needs.

-- 'driver': the gate's frozen benchmark driver timed the arms; 'candidate':
-- each arm's harness timed itself (rows recorded before version 5 too).
ALTER TABLE bench_cases ADD COLUMN timing TEXT NOT NULL DEFAULT 'candidate' CHECK (timing IN ('driver', 'candidate'));
-- JSON array of {kind, arm, reason, figures} (orchestrator/timing_checks.h):
-- the cross-checks the case's timings failed; '[]' when none.
ALTER TABLE bench_cases ADD COLUMN timing_flags TEXT NOT NULL DEFAULT '[]';
-- JSON object: what the checks measured (each arm's wall-time fit, declared
-- work, the ceilings compared with); '{}' before version 5.
ALTER TABLE bench_cases ADD COLUMN timing_checks TEXT NOT NULL DEFAULT '{}';

-- A machine's ceilings, measured by `densefeed machine calibrate`.
CREATE TABLE IF NOT EXISTS machine_ceilings (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  host TEXT NOT NULL,
  device TEXT NOT NULL,                       -- 'cpu' or the GPU's UUID
  device_name TEXT NOT NULL,
  bytes_per_s REAL NOT NULL CHECK (bytes_per_s > 0),  -- copy bandwidth, read + write bytes per second
  flops_per_s REAL NOT NULL CHECK (flops_per_s >= 0), -- fastest matrix rate; 0 = not measured
  figures TEXT NOT NULL,                      -- JSON: what the figures rest on
  tool TEXT NOT NULL,
  measured_at TEXT NOT NULL
);

-- What a person accepted for an experiment's promotion that densefeed's
-- checks cannot settle: 'candidate_timing' (its benchmark was timed by the
-- candidate's own harness) or 'speedup_beyond_bound' (a speedup above the
-- gate's bench.max_speedup).
CREATE TABLE IF NOT EXISTS bench_acceptances (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  concern TEXT NOT NULL CHECK (concern IN ('candidate_timing', 'speedup_beyond_bound')),
  accepted_by TEXT NOT NULL CHECK (length(accepted_by) > 0),
  accepted_at TEXT NOT NULL
);

CREATE TRIGGER IF NOT EXISTS machine_ceilings_no_replace BEFORE INSERT ON machine_ceilings
WHEN EXISTS (SELECT 1 FROM machine_ceilings WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'machine_ceilings is append-only: a row with this id exists'); END;
CREATE TRIGGER IF NOT EXISTS machine_ceilings_no_update BEFORE UPDATE ON machine_ceilings
BEGIN SELECT RAISE(ABORT, 'machine_ceilings is append-only'); END;
CREATE TRIGGER IF NOT EXISTS machine_ceilings_no_delete BEFORE DELETE ON machine_ceilings
BEGIN SELECT RAISE(ABORT, 'machine_ceilings is append-only'); END;

CREATE TRIGGER IF NOT EXISTS bench_acceptances_need_their_experiment BEFORE INSERT ON bench_acceptances
WHEN NOT EXISTS (SELECT 1 FROM experiments WHERE id = NEW.experiment_id)
BEGIN SELECT RAISE(ABORT, 'bench_acceptances: no such experiment'); END;
CREATE TRIGGER IF NOT EXISTS bench_acceptances_no_replace BEFORE INSERT ON bench_acceptances
WHEN EXISTS (SELECT 1 FROM bench_acceptances WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'bench_acceptances is append-only: a row with this id exists'); END;
CREATE TRIGGER IF NOT EXISTS bench_acceptances_no_update BEFORE UPDATE ON bench_acceptances
BEGIN SELECT RAISE(ABORT, 'bench_acceptances is append-only'); END;
CREATE TRIGGER IF NOT EXISTS bench_acceptances_no_delete BEFORE DELETE ON bench_acceptances
BEGIN SELECT RAISE(ABORT, 'bench_acceptances is append-only'); END;

-- Promotion of a benchmark timed by the candidate needs a person's acceptance
-- of that; so does a speedup beyond the gate's bound.
CREATE TRIGGER IF NOT EXISTS promotions_need_trusted_timing BEFORE INSERT ON promotions
WHEN EXISTS (SELECT 1 FROM bench_cases b WHERE b.experiment_id = NEW.experiment_id AND b.timing = 'candidate')
 AND NOT EXISTS (SELECT 1 FROM bench_acceptances a WHERE a.experiment_id = NEW.experiment_id AND a.concern = 'candidate_timing')
BEGIN SELECT RAISE(ABORT, 'promotions: the benchmark was timed by the candidate and no one accepted that (promote --accept-candidate-timing)'); END;
CREATE TRIGGER IF NOT EXISTS promotions_need_accepted_bound BEFORE INSERT ON promotions
WHEN EXISTS (SELECT 1 FROM bench_cases b, json_each(b.timing_flags) f WHERE b.experiment_id = NEW.experiment_id
             AND json_extract(f.value, '$.kind') = 'beyond_bound')
 AND NOT EXISTS (SELECT 1 FROM bench_acceptances a WHERE a.experiment_id = NEW.experiment_id AND a.concern = 'speedup_beyond_bound')
BEGIN SELECT RAISE(ABORT, 'promotions: a speedup is beyond the gate''s bound and no one accepted it (promote --accept-speedup-beyond-bound)'); END;
