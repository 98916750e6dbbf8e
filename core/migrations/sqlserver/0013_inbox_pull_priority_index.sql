-- Version 13 on SQL Server: the pull claim's pending scan in priority order, replacing
-- idx_inbox_pull_pending (migrations/postgres/0013_inbox_pull_priority_index.sql). SQL Server
-- keys an index on columns, not expressions: `priority DESC` gives the order PostgreSQL's
-- `-priority` does (highest first), and the claim here always scans from the head.
CREATE INDEX idx_inbox_pull_pending_priority ON inbox (source, priority DESC, scheduled_at, sequence)
    WHERE consumption = 'pull' AND state = 'pending';
DROP INDEX idx_inbox_pull_pending ON inbox;
