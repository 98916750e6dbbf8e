-- queuebox:no-transaction
-- Fewer index entries per outbox state change (issue 21, the outbox drain's database CPU).
--
-- Every state change of an outbox row is a non-HOT update (`state` is in the partial
-- indexes' predicates), so PostgreSQL adds an entry for the new row version to every index
-- whose predicate the new version matches. The claim (pending -> processing) added four: the
-- primary key, idx_outbox_processing_lease, idx_outbox_key_sequence (whose predicate also
-- holds rows without a key) and idx_outbox_topic (no predicate); the sent mark three. Each
-- entry costs the database ~1.5-3 µs per row; the claim of 1,000 unkeyed rows went
-- from ~15 to ~10.6 µs per row with the two changes below (benchmarks/outbox.md).
--
-- 1. idx_outbox_key_sequence holds keyed rows only. The key head rule and the walk over keys
--    compare keys with `=` / `>`, which already excludes NULL. Rows without a key get an
--    index of their own that only pending rows enter, so claiming one adds nothing there.
--    It is on (key, sequence) though `key` is always NULL in it: the claim's `unkeyed` branch
--    orders by (key, sequence), which reads either this index or, on a schema of one's own
--    (proto-docs/own-schema.md), a key index that still holds NULL keys.
-- 2. idx_outbox_topic holds terminal rows only: what filters by topic (`queuebox dead`, the
--    admin replay) looks at `sent` and `dead` rows, so a live row's insert and claim no
--    longer add an entry.
--
-- Online (issue 41): the first line makes the runner send these statements one at a time,
-- outside a transaction (core/src/migrate.rs). CONCURRENTLY builds and drops an index while the
-- application goes on inserting into and updating the outbox; the topic index over the sent
-- and dead rows retention keeps takes time in proportion to them, and as first released this
-- migration blocked outbox writes for all of it. A replaced index keeps its name without a
-- moment where the claim lacks it: the new one is built under a temporary name, the old one
-- dropped, the new one renamed. Every statement can run again after an interruption; an index
-- an interrupted build left INVALID is dropped and built again by the runner.
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_outbox_unkeyed_pending ON outbox (key, sequence)
    WHERE state = 'pending' AND key IS NULL;

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_outbox_key_sequence_v9 ON outbox (key, sequence)
    WHERE state IN ('pending', 'processing') AND key IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS idx_outbox_key_sequence;
ALTER INDEX IF EXISTS idx_outbox_key_sequence_v9 RENAME TO idx_outbox_key_sequence;

CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_outbox_topic_v9 ON outbox (topic)
    WHERE state IN ('sent', 'dead');
DROP INDEX CONCURRENTLY IF EXISTS idx_outbox_topic;
ALTER INDEX IF EXISTS idx_outbox_topic_v9 RENAME TO idx_outbox_topic;
