-- densefeed ledger, migration 8 -> 9 (schemas/ledger.md documents every table
-- and column). Applied by Ledger on open, inside the same BEGIN IMMEDIATE
-- transaction as the earlier steps, for new files as for old ones.
--
-- What it adds (issue 27, one experiment record): a stage's failure detail
-- (common/failure.h Failure::detail: the files a worktree lock failure names,
-- for example), so that the typed record every printer reads (Ledger::record)
-- holds what the run that decided it held. '' for rows recorded before 9.
ALTER TABLE stage_outcomes ADD COLUMN failure_detail TEXT NOT NULL DEFAULT '';
