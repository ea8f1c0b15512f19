-- densefeed ledger, migration 6 -> 7 (schemas/ledger.md documents every table
-- and column). Applied by Ledger on open, inside the same BEGIN IMMEDIATE
-- transaction as the earlier steps, for new files as for old ones.
--
-- What it adds (issue 26, a base the agent did not write): who wrote each
-- experiment's base (orchestrator/base_origin.h), and a person's acceptance of
-- a base the agent wrote, which promotion then needs.

-- trusted_ref | promoted | trusted_history: a base the agent did not write;
-- agent_commits | worktree | unjudged: one it did (or may have);
-- 'unrecorded' for experiments recorded before version 7.
ALTER TABLE experiments ADD COLUMN base_origin TEXT NOT NULL DEFAULT 'unrecorded'
  CHECK (base_origin IN ('trusted_ref', 'promoted', 'trusted_history', 'agent_commits', 'worktree', 'unjudged', 'unrecorded'));
-- JSON object {kind, sha, merge_base, changed, changed_count, reason}; '{}' before version 7.
ALTER TABLE experiments ADD COLUMN base_origin_detail TEXT NOT NULL DEFAULT '{}';

-- bench_acceptances gains the concern 'agent_base'. SQLite cannot change a
-- column's CHECK, so the table is made again with the same rows (same ids:
-- their record_chain links still hold), and the triggers that name it with it.
DROP TRIGGER IF EXISTS promotions_need_trusted_timing;
DROP TRIGGER IF EXISTS promotions_need_accepted_bound;
CREATE TABLE bench_acceptances_7 (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  concern TEXT NOT NULL CHECK (concern IN ('candidate_timing', 'speedup_beyond_bound', 'agent_base')),
  accepted_by TEXT NOT NULL CHECK (length(accepted_by) > 0),
  accepted_at TEXT NOT NULL
);
INSERT INTO bench_acceptances_7(id, experiment_id, concern, accepted_by, accepted_at)
  SELECT id, experiment_id, concern, accepted_by, accepted_at FROM bench_acceptances ORDER BY id;
DROP TABLE bench_acceptances;
ALTER TABLE bench_acceptances_7 RENAME TO bench_acceptances;

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

CREATE TRIGGER IF NOT EXISTS promotions_need_trusted_timing BEFORE INSERT ON promotions
WHEN EXISTS (SELECT 1 FROM bench_cases b WHERE b.experiment_id = NEW.experiment_id AND b.timing = 'candidate')
 AND NOT EXISTS (SELECT 1 FROM bench_acceptances a WHERE a.experiment_id = NEW.experiment_id AND a.concern = 'candidate_timing')
BEGIN SELECT RAISE(ABORT, 'promotions: the benchmark was timed by the candidate and no one accepted that (promote --accept-candidate-timing)'); END;
CREATE TRIGGER IF NOT EXISTS promotions_need_accepted_bound BEFORE INSERT ON promotions
WHEN EXISTS (SELECT 1 FROM bench_cases b, json_each(b.timing_flags) f WHERE b.experiment_id = NEW.experiment_id
             AND json_extract(f.value, '$.kind') = 'beyond_bound')
 AND NOT EXISTS (SELECT 1 FROM bench_acceptances a WHERE a.experiment_id = NEW.experiment_id AND a.concern = 'speedup_beyond_bound')
BEGIN SELECT RAISE(ABORT, 'promotions: a speedup is beyond the gate''s bound and no one accepted it (promote --accept-speedup-beyond-bound)'); END;
-- A benchmark against a base the agent wrote (or may have) is promoted only
-- when a person accepted that base.
CREATE TRIGGER IF NOT EXISTS promotions_need_a_base_the_agent_did_not_write BEFORE INSERT ON promotions
WHEN EXISTS (SELECT 1 FROM experiments e WHERE e.id = NEW.experiment_id
             AND e.base_origin IN ('agent_commits', 'worktree', 'unjudged')
             AND EXISTS (SELECT 1 FROM bench_cases b WHERE b.experiment_id = e.id))
 AND NOT EXISTS (SELECT 1 FROM bench_acceptances a WHERE a.experiment_id = NEW.experiment_id AND a.concern = 'agent_base')
BEGIN SELECT RAISE(ABORT, 'promotions: the benchmark''s base is one the agent wrote and no one accepted it (promote --accept-agent-base)'); END;
