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
-- The three indexes are built in this migration's transaction, which blocks writes to the
-- outbox while they build: the first two over the live rows (few), the last over the sent and dead
-- rows that retention keeps, in time proportional to them. On an outbox that keeps millions
-- of terminal rows, run `queuebox migrate` at a quiet moment.
DROP INDEX idx_outbox_key_sequence;
CREATE INDEX idx_outbox_key_sequence ON outbox (key, sequence)
    WHERE state IN ('pending', 'processing') AND key IS NOT NULL;
CREATE INDEX idx_outbox_unkeyed_pending ON outbox (key, sequence)
    WHERE state = 'pending' AND key IS NULL;

DROP INDEX idx_outbox_topic;
CREATE INDEX idx_outbox_topic ON outbox (topic) WHERE state IN ('sent', 'dead');
