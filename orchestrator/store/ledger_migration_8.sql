-- densefeed ledger, migration 7 -> 8 (schemas/ledger.md documents every table
-- and column). Applied by Ledger on open, inside the same BEGIN IMMEDIATE
-- transaction as the earlier steps, for new files as for old ones.
--
-- What it adds (issue 27, typed all the way): the guards that held a bench
-- case's decision back (judge/bench_statistics.h Decision::guard_*), as
-- values, so that nothing downstream reads them back out of the reason text.

-- JSON array of the guards that held, in this order when several did:
-- "spread" (an arm's relative spread >= 10%), "clock" (the arms' median SM
-- clocks differ by more than 1%), "throttle" (more than 10% of the samples
-- throttled); [] when none. NULL for cases recorded before version 8, whose
-- guards were kept only in the reason's words.
ALTER TABLE bench_cases ADD COLUMN guards TEXT
  CHECK (guards IS NULL OR json_valid(guards));
