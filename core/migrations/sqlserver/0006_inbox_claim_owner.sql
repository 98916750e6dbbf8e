-- Version 6 on SQL Server: the claim owner column, same shape as
-- migrations/postgres/0006_inbox_claim_owner.sql so both engines keep one table shape. SQL
-- Server pull claims leave it NULL: the dead-session check is PostgreSQL's (advisory locks
-- visible across sessions); a SQL Server worker's rows are recovered when their lease expires.
ALTER TABLE inbox ADD
    claim_owner BIGINT NULL;
