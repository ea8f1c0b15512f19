-- densefeed ledger, migration 11 -> 12 (schemas/ledger.md documents every table
-- and column). Applied by Ledger on open, inside the same BEGIN IMMEDIATE
-- transaction as the earlier steps, for new files as for old ones.
--
-- What it adds (issue 30, hints from the gate's structure): the number of
-- parts a case's work was cut into (gate_structure.h case_parts: the gate's
-- partition key, or what the candidate reported in meta.json), so that hints
-- and densefeed narrow read partitioned against unpartitioned from the
-- record. NULL: the gate declares no partition, or nothing was reported.
ALTER TABLE gate_cases ADD COLUMN parts INTEGER CHECK (parts IS NULL OR parts >= 1);

-- What densefeed narrow concluded about an experiment (pipeline/narrow.h):
-- the layer at fault, the sentence, and the whole result as JSON
-- (schemas/narrow.schema.json: steps, reruns, commit, budget). Its steps
-- are experiments whose parent_id is experiment_id. Append-only, chained.
CREATE TABLE IF NOT EXISTS narrowings (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  layer TEXT NOT NULL CHECK (layer IN ('precision-of-partitioning', 'precision', 'partitioned-algorithm', 'commit',
                                       'input-regime', 'nondeterminism', 'algorithm-or-inputs', 'undetermined')),
  conclusion TEXT NOT NULL,
  result TEXT NOT NULL CHECK (json_valid(result) AND json_type(result) = 'object'),
  recorded_at TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS narrowings_need_their_experiment BEFORE INSERT ON narrowings
WHEN NOT EXISTS (SELECT 1 FROM experiments WHERE id = NEW.experiment_id)
BEGIN SELECT RAISE(ABORT, 'narrowings: no such experiment'); END;
CREATE TRIGGER IF NOT EXISTS narrowings_no_replace BEFORE INSERT ON narrowings
WHEN EXISTS (SELECT 1 FROM narrowings WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'narrowings is append-only: a row with this id exists'); END;
CREATE TRIGGER IF NOT EXISTS narrowings_no_update BEFORE UPDATE ON narrowings
BEGIN SELECT RAISE(ABORT, 'narrowings is append-only'); END;
CREATE TRIGGER IF NOT EXISTS narrowings_no_delete BEFORE DELETE ON narrowings
BEGIN SELECT RAISE(ABORT, 'narrowings is append-only'); END;
