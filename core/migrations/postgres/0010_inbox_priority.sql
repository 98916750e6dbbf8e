-- Pull rows with a priority and a dead-letter ceiling of their own (issue 38).
--
-- Two columns of the inbox row, both added without rewriting a row (a constant default and a
-- nullable column are catalogue changes only). The ALTER still takes the table's ACCESS
-- EXCLUSIVE lock for an instant; lock_timeout makes it give up (and `queuebox migrate` fail,
-- to be run again) instead of queueing every insert and claim behind a long transaction that
-- holds a lock on the inbox.
--   priority      within a pull source a higher priority is claimed first; an aggregate keeps
--                 its arrival order whatever the priorities. -32767 to 32767 (the claim's
--                 index orders by -priority, which -32768 would overflow); 0 by default.
--   max_attempts  the dead-letter ceiling of this row; NULL: the worker's retry policy's.
SET LOCAL lock_timeout = '5s';
ALTER TABLE inbox
    ADD COLUMN priority     SMALLINT NOT NULL DEFAULT 0,
    ADD COLUMN max_attempts INTEGER;
