-- The bare-SQL ceiling of benchmarks/peers (issue 21): one pgbench "transaction" claims a
-- batch of QueueBox's own pull rows with a plain SKIP LOCKED update, then completes them with
-- a second statement, each in autocommit. No lease, no fence token, no claim owner, no
-- aggregate rule, no renewal: what PostgreSQL allows for claim + complete on the same table
-- and indexes. :batch is given with -D batch=N.
WITH c AS (
  UPDATE inbox SET state = 'processing'
   WHERE id IN (SELECT id FROM inbox
                 WHERE source = 'bench' AND consumption = 'pull' AND state = 'pending'
                 ORDER BY scheduled_at, sequence LIMIT :batch FOR UPDATE SKIP LOCKED)
  RETURNING id)
SELECT coalesce(array_agg(id), '{}')::text AS ids FROM c
\gset
UPDATE inbox SET state = 'processed', processed_at = clock_timestamp() WHERE id = ANY(':ids'::uuid[]);
