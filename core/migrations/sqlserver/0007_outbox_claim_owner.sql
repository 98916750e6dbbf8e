-- Version 7 on SQL Server: the outbox claim owner column, same shape as
-- migrations/postgres/0007_outbox_claim_owner.sql so both engines keep one table shape. SQL
-- Server relays leave it NULL (no advisory locks visible across sessions); a crashed relay's
-- rows are reclaimed when their lease expires.
ALTER TABLE outbox ADD
    claim_owner BIGINT NULL;
