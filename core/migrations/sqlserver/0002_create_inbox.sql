-- The inbox (SQL Server): every received message stored once, deduplicated on
-- (source, idempotency_key). States: pending -> processing -> processed | pending (retry,
-- reclaim) | dead. consumption is fixed at receipt: push rows are moved by the relay, pull
-- rows by a worker. Same version and final shape as migrations/postgres/0002_create_inbox.sql;
-- the rules of this directory are at the top of 0001_create_outbox.sql.
SET QUOTED_IDENTIFIER ON;
SET ANSI_NULLS ON;

CREATE SEQUENCE inbox_sequence_seq AS BIGINT START WITH 1 INCREMENT BY 1;

CREATE TABLE inbox (
    id               UNIQUEIDENTIFIER NOT NULL CONSTRAINT df_inbox_id DEFAULT NEWID(),
    source           NVARCHAR(255)    NOT NULL,
    idempotency_key  NVARCHAR(255)    NOT NULL,
    aggregate_id     NVARCHAR(255)    NULL,
    event_type       NVARCHAR(255)    NULL,
    payload          NVARCHAR(MAX)    NOT NULL,
    headers          NVARCHAR(MAX)    NOT NULL CONSTRAINT df_inbox_headers DEFAULT '{}',
    state            NVARCHAR(50)     NOT NULL CONSTRAINT df_inbox_state DEFAULT 'pending'
                     CONSTRAINT ck_inbox_state CHECK (state IN ('pending', 'processing', 'processed', 'dead')),
    consumption      VARCHAR(4)       NOT NULL CONSTRAINT df_inbox_consumption DEFAULT 'push'
                     CONSTRAINT ck_inbox_consumption CHECK (consumption IN ('push', 'pull')),
    attempt          INT              NOT NULL CONSTRAINT df_inbox_attempt DEFAULT 0,
    scheduled_at     DATETIME2        NOT NULL CONSTRAINT df_inbox_scheduled_at DEFAULT SYSUTCDATETIME(),
    created_at       DATETIME2        NOT NULL CONSTRAINT df_inbox_created_at DEFAULT SYSUTCDATETIME(),
    processed_at     DATETIME2        NULL,
    claimed_at       DATETIME2        NULL,
    claim_token      UNIQUEIDENTIFIER NULL,
    lease_expires_at DATETIME2        NULL,
    last_error       NVARCHAR(MAX)    NULL,
    correlation_id   NVARCHAR(128)    NULL,
    -- Arrival order: created_at ties inside one transaction, this never does.
    sequence         BIGINT           NOT NULL CONSTRAINT df_inbox_sequence DEFAULT (NEXT VALUE FOR inbox_sequence_seq),
    CONSTRAINT pk_inbox PRIMARY KEY NONCLUSTERED (id),
    CONSTRAINT uq_inbox_source_idempotency UNIQUE (source, idempotency_key)
);

-- Random NEWID() keys would fragment a clustered primary key; rows cluster in arrival order.
CREATE UNIQUE CLUSTERED INDEX cx_inbox_sequence ON inbox (sequence);
-- Pull claim, branch (a): due pending rows of one source in claim order.
CREATE INDEX idx_inbox_pull_pending ON inbox (source, scheduled_at, sequence)
    WHERE consumption = 'pull' AND state = 'pending';
-- Pull claim, branch (b): processing rows of one source whose lease expired.
CREATE INDEX idx_inbox_pull_processing ON inbox (source, lease_expires_at)
    WHERE consumption = 'pull' AND state = 'processing';
-- Pull claim, aggregate head rule: earlier live rows of the same aggregate.
CREATE INDEX idx_inbox_pull_aggregate ON inbox (source, aggregate_id, sequence)
    WHERE consumption = 'pull' AND state IN ('pending', 'processing') AND aggregate_id IS NOT NULL;
-- Pull claim, busy aggregates: rows of an aggregate that hold a lease.
CREATE INDEX idx_inbox_pull_busy ON inbox (source, aggregate_id, lease_expires_at)
    WHERE consumption = 'pull' AND state = 'processing' AND aggregate_id IS NOT NULL;
-- Push relay claim: due pending push rows in claim order.
CREATE INDEX idx_inbox_push_pending ON inbox (scheduled_at, sequence)
    WHERE consumption = 'push' AND state = 'pending';
-- Push relay: busy aggregates and reclaim of expired push leases.
CREATE INDEX idx_inbox_push_processing ON inbox (lease_expires_at)
    WHERE consumption = 'push' AND state = 'processing';
CREATE INDEX idx_inbox_push_aggregate ON inbox (aggregate_id, sequence)
    WHERE consumption = 'push' AND state IN ('pending', 'processing') AND aggregate_id IS NOT NULL;
-- Retention deletes terminal rows by age.
CREATE INDEX idx_inbox_terminal_created ON inbox (created_at) WHERE state IN ('processed', 'dead');
