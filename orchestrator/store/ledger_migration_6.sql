-- densefeed ledger, migration 5 -> 6 (schemas/ledger.md documents every table
-- and column). Applied by Ledger on open, inside the same BEGIN IMMEDIATE
-- transaction as the earlier steps, for new files as for old ones.
--
-- What it adds (issue 25, nothing trusted comes from the agent's tree): what
-- densefeed found altered in its own exports and cached builds, a person's
-- acknowledgement of each, and the nonce each run of an experiment was given
-- when it started (a pending gate run names it, signed with the ledger's key).

-- Something densefeed trusts was found altered before use: an export of the
-- trusted ref (or another commit) that no longer matches its commit, or a
-- cached revision build whose seal no longer matches its files. densefeed
-- replaced it; `densefeed audit` fails until a person acknowledges the event.
CREATE TABLE IF NOT EXISTS tamper_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  detected_at TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('export_changed', 'export_missing', 'export_extra', 'export_link', 'build_seal')),
  path TEXT NOT NULL,              -- the export or build folder's file that differed (absolute)
  detail TEXT NOT NULL,            -- what differed: expected and found
  commit_sha TEXT NOT NULL         -- the commit the export or build is of
);

-- A person's acknowledgement of a tamper event (`densefeed audit acknowledge`).
CREATE TABLE IF NOT EXISTS tamper_acknowledgements (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id INTEGER NOT NULL UNIQUE REFERENCES tamper_events(id),
  acknowledged_by TEXT NOT NULL CHECK (length(acknowledged_by) > 0),
  note TEXT NOT NULL,
  acknowledged_at TEXT NOT NULL
);

-- The nonce a run of an experiment was given when it started (with its
-- `started` event): a pending gate run must name one issued to its experiment.
CREATE TABLE IF NOT EXISTS run_nonces (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  nonce TEXT NOT NULL UNIQUE CHECK (length(nonce) = 32),
  created_at TEXT NOT NULL
);

CREATE TRIGGER IF NOT EXISTS tamper_events_no_replace BEFORE INSERT ON tamper_events
WHEN EXISTS (SELECT 1 FROM tamper_events WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'tamper_events is append-only: a row with this id exists'); END;
CREATE TRIGGER IF NOT EXISTS tamper_events_no_update BEFORE UPDATE ON tamper_events
BEGIN SELECT RAISE(ABORT, 'tamper_events is append-only'); END;
CREATE TRIGGER IF NOT EXISTS tamper_events_no_delete BEFORE DELETE ON tamper_events
BEGIN SELECT RAISE(ABORT, 'tamper_events is append-only'); END;

CREATE TRIGGER IF NOT EXISTS tamper_acknowledgements_need_their_event BEFORE INSERT ON tamper_acknowledgements
WHEN NOT EXISTS (SELECT 1 FROM tamper_events WHERE id = NEW.event_id)
BEGIN SELECT RAISE(ABORT, 'tamper_acknowledgements: no such tamper event'); END;
CREATE TRIGGER IF NOT EXISTS tamper_acknowledgements_no_replace BEFORE INSERT ON tamper_acknowledgements
WHEN EXISTS (SELECT 1 FROM tamper_acknowledgements WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'tamper_acknowledgements is append-only: a row with this id exists'); END;
CREATE TRIGGER IF NOT EXISTS tamper_acknowledgements_no_update BEFORE UPDATE ON tamper_acknowledgements
BEGIN SELECT RAISE(ABORT, 'tamper_acknowledgements is append-only'); END;
CREATE TRIGGER IF NOT EXISTS tamper_acknowledgements_no_delete BEFORE DELETE ON tamper_acknowledgements
BEGIN SELECT RAISE(ABORT, 'tamper_acknowledgements is append-only'); END;

CREATE TRIGGER IF NOT EXISTS run_nonces_need_their_experiment BEFORE INSERT ON run_nonces
WHEN NOT EXISTS (SELECT 1 FROM experiments WHERE id = NEW.experiment_id)
BEGIN SELECT RAISE(ABORT, 'run_nonces: no such experiment'); END;
CREATE TRIGGER IF NOT EXISTS run_nonces_no_replace BEFORE INSERT ON run_nonces
WHEN EXISTS (SELECT 1 FROM run_nonces WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'run_nonces is append-only: a row with this id exists'); END;
CREATE TRIGGER IF NOT EXISTS run_nonces_no_update BEFORE UPDATE ON run_nonces
BEGIN SELECT RAISE(ABORT, 'run_nonces is append-only'); END;
CREATE TRIGGER IF NOT EXISTS run_nonces_no_delete BEFORE DELETE ON run_nonces
BEGIN SELECT RAISE(ABORT, 'run_nonces is append-only'); END;
