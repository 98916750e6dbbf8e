-- queuebox:no-transaction
-- A cancelled row (issue 38): an operator or an application cancels a pending pull inbox row
-- or a pending outbox row, which then stays, terminal, until retention deletes it like a
-- processed or sent row. This migration lets `state` hold 'cancelled' and widens the two
-- retention indexes to cover it (store/postgres/sql.rs, DELETE_OLD_*).
--
-- Online: the first line makes the runner send these statements one at a time, outside a
-- transaction (core/src/migrate.rs). A CHECK constraint cannot be altered, only replaced; adding
-- one as written checks every row while it holds the table's strongest lock, so inserts and
-- claims would wait for a scan of the whole inbox. Instead:
--   1. the new constraint is added NOT VALID (checked on every write from now on; the existing
--      rows are not read, so the lock lasts a moment);
--   2. VALIDATE CONSTRAINT reads the rows under a lock that lets writes go on;
--   3. the old constraint is dropped and the new one takes its name (each a moment's lock).
-- Every row already satisfies the new constraint, which allows all the old states.
-- Each statement can run again after an interruption: 1 drops a half-done new constraint before
-- adding it again, 3's drop names the old constraint (or, on a run after 3, the renamed new one,
-- which 1 and 2 have just made again). A moment's lock still waits for a transaction that holds
-- the table (a long application transaction), and writes queue behind it meanwhile.
ALTER TABLE inbox DROP CONSTRAINT IF EXISTS ck_inbox_state_v14,
    ADD CONSTRAINT ck_inbox_state_v14
        CHECK (state IN ('pending', 'processing', 'processed', 'dead', 'cancelled')) NOT VALID;
ALTER TABLE inbox VALIDATE CONSTRAINT ck_inbox_state_v14;
ALTER TABLE inbox DROP CONSTRAINT IF EXISTS ck_inbox_state;
ALTER TABLE inbox RENAME CONSTRAINT ck_inbox_state_v14 TO ck_inbox_state;

ALTER TABLE outbox DROP CONSTRAINT IF EXISTS ck_outbox_state_v14,
    ADD CONSTRAINT ck_outbox_state_v14
        CHECK (state IN ('pending', 'processing', 'sent', 'dead', 'cancelled')) NOT VALID;
ALTER TABLE outbox VALIDATE CONSTRAINT ck_outbox_state_v14;
ALTER TABLE outbox DROP CONSTRAINT IF EXISTS ck_outbox_state;
ALTER TABLE outbox RENAME CONSTRAINT ck_outbox_state_v14 TO ck_outbox_state;

-- Retention's scans of terminal rows by age, now with the cancelled ones (built under a
-- temporary name, the old index dropped, the new one renamed, as in 0009).
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_inbox_terminal_created_v14 ON inbox (created_at)
    WHERE state IN ('processed', 'dead', 'cancelled');
DROP INDEX CONCURRENTLY IF EXISTS idx_inbox_terminal_created;
ALTER INDEX IF EXISTS idx_inbox_terminal_created_v14 RENAME TO idx_inbox_terminal_created;

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_outbox_terminal_updated_v14 ON outbox (updated_at)
    WHERE state IN ('sent', 'dead', 'cancelled');
DROP INDEX CONCURRENTLY IF EXISTS idx_outbox_terminal_updated;
ALTER INDEX IF EXISTS idx_outbox_terminal_updated_v14 RENAME TO idx_outbox_terminal_updated;
