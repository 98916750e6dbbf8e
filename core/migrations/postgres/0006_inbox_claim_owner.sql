-- The session that holds a pull claim (issue 21, crash recovery in seconds): each worker holds
-- a session-level advisory lock on a random key for as long as it runs, on a connection of its
-- own, and every row it claims records that key here. When the worker process dies its
-- connection closes and PostgreSQL releases the lock, so a live worker that can take the lock
-- knows the owner is gone and expires the owner's leases at once instead of waiting for them
-- (EXPIRE_DEAD_OWNERS in store/postgres/sql.rs). NULL: a claim made without such a session
-- (SQL Server, or while a worker's lock connection is being re-opened); it waits for its
-- lease. A nullable column without a default rewrites no existing row.
ALTER TABLE inbox ADD COLUMN claim_owner BIGINT;
