-- queuebox:no-transaction
-- The pull claim's pending scan in priority order (issue 38): due pending rows of one source,
-- highest priority first, then in arrival order, replacing idx_inbox_pull_pending. Keyed on
-- -priority (ascending) so that a claim that starts where the last one stopped bounds its scan
-- with one row comparison, (-priority, scheduled_at, sequence) >= (…), as it did with
-- (scheduled_at, sequence) (store/postgres/claim_start.rs). Rows of one priority whose time
-- has not come are skipped inside the index (scheduled_at is a key column), without a visit
-- to the table.
--
-- Online: the first line makes the runner send these statements one at a time, outside a
-- transaction (core/src/migrate.rs). Building an index reads the whole inbox, finished rows
-- kept for retention included; CONCURRENTLY lets inserts and claims go on meanwhile. Until the
-- old index is dropped the claim may use either; both are kept up to date. Each statement can
-- run again after an interruption.
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_inbox_pull_pending_priority
    ON inbox (source, (-priority), scheduled_at, sequence)
    WHERE consumption = 'pull' AND state = 'pending';
DROP INDEX CONCURRENTLY IF EXISTS idx_inbox_pull_pending;
