-- densefeed ledger, migration 10 -> 11 (schemas/ledger.md documents every table
-- and column). Applied by Ledger on open, inside the same BEGIN IMMEDIATE
-- transaction as the earlier steps, for new files as for old ones.
--
-- What it adds (issue 30, feedback an agent can act on): an experiment may
-- replay or narrow an earlier one (run --failing-of ID, densefeed narrow):
-- parent_id names it and step says which step this is ("replay", "rerun 2
-- of 3", ...); case_filter is the run's --case filters (JSON array of their
-- texts; [] = every case of the profile). NULL, '' and '[]' for rows before.
ALTER TABLE experiments ADD COLUMN parent_id INTEGER REFERENCES experiments(id);
ALTER TABLE experiments ADD COLUMN step TEXT NOT NULL DEFAULT '';
ALTER TABLE experiments ADD COLUMN case_filter TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(case_filter) AND json_type(case_filter) = 'array');

-- A parent is an earlier experiment of the same ledger.
CREATE TRIGGER IF NOT EXISTS experiments_parent_is_earlier BEFORE INSERT ON experiments
WHEN NEW.parent_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM experiments p WHERE p.id = NEW.parent_id)
BEGIN SELECT RAISE(ABORT, 'experiments: parent_id names no earlier experiment'); END;
