-- The relay's claim owner on outbox rows (issue 21, relay crash recovery in seconds), as
-- 0006 did for pull workers: each relay process holds a session-level advisory lock on a
-- random key on a connection of its own, and every outbox row (and push inbox row) it claims
-- records the key. When the process dies PostgreSQL releases the lock, and any live relay that
-- can take it shared knows the owner is gone and puts the owner's rows back to pending at once
-- instead of waiting for their lease (EXPIRE_DEAD_RELAY_OUTBOX / EXPIRE_DEAD_RELAY_PUSH in
-- store/postgres/sql.rs). NULL: claimed without such a session; it waits for its lease.
-- Nullable without a default: no existing row is rewritten.
ALTER TABLE outbox ADD COLUMN claim_owner BIGINT;
