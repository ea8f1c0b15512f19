-- densefeed ledger, migration 3 -> 4 (schemas/ledger.md documents every table
-- and column). Applied by Ledger on open, inside the same BEGIN IMMEDIATE
-- transaction as the earlier steps, for new files as for old ones.
--
-- What it adds: heartbeats, so that a process that died on another host
-- (whose pid cannot be checked from here) is seen dead by any live worker.

-- One row per thing a process keeps alive while it runs it: a worker's or a
-- run's `started` experiment (started_event_id), or a promote's acceptance
-- run (acceptance_stage_id, the stage_outcomes row recorded `started`). The
-- row is made in the same transaction as what it keeps alive, and its owner
-- beats it every interval_s seconds (DENSEFEED_HEARTBEAT_S, default 10):
-- beats counts the beats, last_beat_at is the owner's clock at the last one.
--
-- Unlike every other table, a row is updated in place (beats and
-- last_beat_at only; the triggers refuse anything else) and is not in
-- record_chain: a heartbeat is liveness, not a result. What it leads to is
-- recorded and chained: the `requeued` or `interrupted` event, whose detail
-- names the owner and its last beat.
--
-- A row is stale once its beats have stood still for 3 of its own intervals.
-- A worker judges that by its own steady clock (it watches the count), so the
-- hosts' clocks need not agree; a process of this host is judged by its pid
-- instead (orchestrator/process_identity.h).
CREATE TABLE IF NOT EXISTS heartbeats (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  owner TEXT NOT NULL CHECK (owner IN ('worker', 'run', 'promote')),
  started_event_id INTEGER UNIQUE REFERENCES experiment_events(id),
  acceptance_stage_id INTEGER UNIQUE REFERENCES stage_outcomes(id),
  host TEXT NOT NULL,                       -- the owner's host name
  pid INTEGER NOT NULL,                     -- the owner's pid on that host
  pid_start TEXT NOT NULL DEFAULT '',       -- its start time in clock ticks since boot (/proc/PID/stat field 22)
  interval_s REAL NOT NULL CHECK (interval_s > 0),
  beats INTEGER NOT NULL DEFAULT 1 CHECK (beats >= 1),
  first_beat_at TEXT NOT NULL,              -- ISO 8601 UTC, ms
  last_beat_at TEXT NOT NULL,               -- ISO 8601 UTC, ms
  CHECK ((started_event_id IS NULL) <> (acceptance_stage_id IS NULL))
);
CREATE INDEX IF NOT EXISTS heartbeats_by_experiment ON heartbeats(experiment_id, id);

CREATE TRIGGER IF NOT EXISTS heartbeats_need_experiment BEFORE INSERT ON heartbeats
WHEN NOT EXISTS (SELECT 1 FROM experiments WHERE id = NEW.experiment_id)
  OR (NEW.started_event_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM experiment_events x WHERE x.id = NEW.started_event_id
      AND x.experiment_id = NEW.experiment_id AND x.event = 'started'))
  OR (NEW.acceptance_stage_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM stage_outcomes s WHERE s.id = NEW.acceptance_stage_id
      AND s.experiment_id = NEW.experiment_id AND s.stage = 'acceptance' AND s.verdict = 'started'))
BEGIN SELECT RAISE(ABORT, 'heartbeats: no such started experiment or acceptance run'); END;
CREATE TRIGGER IF NOT EXISTS heartbeats_no_replace BEFORE INSERT ON heartbeats
WHEN EXISTS (SELECT 1 FROM heartbeats WHERE id = NEW.id)
BEGIN SELECT RAISE(ABORT, 'heartbeats: a row with this id exists'); END;
-- A beat changes beats (upwards) and last_beat_at, nothing else.
CREATE TRIGGER IF NOT EXISTS heartbeats_beat_only BEFORE UPDATE ON heartbeats
WHEN NEW.id IS NOT OLD.id OR NEW.experiment_id IS NOT OLD.experiment_id OR NEW.owner IS NOT OLD.owner
  OR NEW.started_event_id IS NOT OLD.started_event_id OR NEW.acceptance_stage_id IS NOT OLD.acceptance_stage_id
  OR NEW.host IS NOT OLD.host OR NEW.pid IS NOT OLD.pid OR NEW.pid_start IS NOT OLD.pid_start
  OR NEW.interval_s IS NOT OLD.interval_s OR NEW.first_beat_at IS NOT OLD.first_beat_at OR NEW.beats <= OLD.beats
BEGIN SELECT RAISE(ABORT, 'heartbeats: a beat only counts up and moves last_beat_at'); END;
CREATE TRIGGER IF NOT EXISTS heartbeats_no_delete BEFORE DELETE ON heartbeats
BEGIN SELECT RAISE(ABORT, 'heartbeats: rows are kept'); END;

-- What is running now, and who keeps it alive: every experiment whose state
-- is started or cancel_requested, and every acceptance run whose latest
-- stage row is started, with its owner's last beat. age_s is by the clock
-- of whoever reads the view (hosts' clocks may differ); stale: no beat for
-- 3 intervals by that clock. A row with no heartbeat (owner NULL) was
-- started before version 4.
DROP VIEW IF EXISTS running;
CREATE VIEW running AS
SELECT s.experiment_id, 'experiment' AS what, s.state, h.owner, h.host, h.pid, h.interval_s, h.beats, h.last_beat_at,
       (julianday('now') - julianday(h.last_beat_at)) * 86400.0 AS age_s,
       (julianday('now') - julianday(h.last_beat_at)) * 86400.0 > 3 * h.interval_s AS stale
FROM experiment_states s
LEFT JOIN heartbeats h ON h.started_event_id = (SELECT MAX(x.id) FROM experiment_events x
                                                WHERE x.experiment_id = s.experiment_id AND x.event = 'started')
WHERE s.state IN ('started', 'cancel_requested')
UNION ALL
SELECT a.experiment_id, 'acceptance', a.verdict, h.owner, h.host, h.pid, h.interval_s, h.beats, h.last_beat_at,
       (julianday('now') - julianday(h.last_beat_at)) * 86400.0,
       (julianday('now') - julianday(h.last_beat_at)) * 86400.0 > 3 * h.interval_s
FROM stage_outcomes a LEFT JOIN heartbeats h ON h.acceptance_stage_id = a.id
WHERE a.stage = 'acceptance' AND a.verdict = 'started'
  AND a.id = (SELECT MAX(x.id) FROM stage_outcomes x WHERE x.experiment_id = a.experiment_id AND x.stage = 'acceptance');
