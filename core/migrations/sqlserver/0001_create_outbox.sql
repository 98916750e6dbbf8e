-- The outbox (SQL Server): rows committed with the application's business write, delivered at
-- least once. States: pending -> processing -> sent | pending (retry, reclaim) | dead.
-- Same version and final shape as migrations/postgres/0001_create_outbox.sql.
-- T-SQL rules of this directory: no GO (the runner sends a file as one batch inside one
-- transaction); every time is UTC from SYSUTCDATETIME(); constraints are named so a later
-- migration can drop them. Statements here only create new objects, which deferred name
-- resolution allows in one batch; a statement that needs a column added earlier in the same
-- file must go through EXEC('...').
-- Filtered indexes need QUOTED_IDENTIFIER and ANSI_NULLS ON (the QueueBox connection sets
-- them too, for every statement that writes these tables).
SET QUOTED_IDENTIFIER ON;
SET ANSI_NULLS ON;

CREATE SEQUENCE outbox_sequence_seq AS BIGINT START WITH 1 INCREMENT BY 1;

CREATE TABLE outbox (
    id               UNIQUEIDENTIFIER NOT NULL CONSTRAINT df_outbox_id DEFAULT NEWID(),
    topic            NVARCHAR(255)    NOT NULL,
    [key]            NVARCHAR(255)    NULL,
    aggregate_type   NVARCHAR(255)    NULL,
    payload          NVARCHAR(MAX)    NOT NULL,
    headers          NVARCHAR(MAX)    NOT NULL CONSTRAINT df_outbox_headers DEFAULT '{}',
    state            NVARCHAR(50)     NOT NULL CONSTRAINT df_outbox_state DEFAULT 'pending'
                     CONSTRAINT ck_outbox_state CHECK (state IN ('pending', 'processing', 'sent', 'dead')),
    attempt          INT              NOT NULL CONSTRAINT df_outbox_attempt DEFAULT 0,
    max_attempts     INT              NOT NULL CONSTRAINT df_outbox_max_attempts DEFAULT 5,
    scheduled_at     DATETIME2        NOT NULL CONSTRAINT df_outbox_scheduled_at DEFAULT SYSUTCDATETIME(),
    created_at       DATETIME2        NOT NULL CONSTRAINT df_outbox_created_at DEFAULT SYSUTCDATETIME(),
    updated_at       DATETIME2        NOT NULL CONSTRAINT df_outbox_updated_at DEFAULT SYSUTCDATETIME(),
    claimed_at       DATETIME2        NULL,
    claim_token      UNIQUEIDENTIFIER NULL,
    lease_expires_at DATETIME2        NULL,
    last_error       NVARCHAR(MAX)    NULL,
    sequence         BIGINT           NOT NULL CONSTRAINT df_outbox_sequence DEFAULT (NEXT VALUE FOR outbox_sequence_seq),
    -- Random NEWID() keys would fragment a clustered primary key; rows cluster in insert order.
    CONSTRAINT pk_outbox PRIMARY KEY NONCLUSTERED (id)
);

CREATE UNIQUE CLUSTERED INDEX cx_outbox_sequence ON outbox (sequence);
-- The claim scans due pending rows in (scheduled_at, sequence) order.
CREATE INDEX idx_outbox_pending_scheduled ON outbox (scheduled_at, sequence) WHERE state = 'pending';
-- Reclaim finds processing rows whose lease ran out.
CREATE INDEX idx_outbox_processing_lease ON outbox (lease_expires_at) WHERE state = 'processing';
-- The key head rule: is there an earlier live row with the same key?
CREATE INDEX idx_outbox_key_sequence ON outbox ([key], sequence) WHERE state IN ('pending', 'processing');
-- Retention deletes terminal rows by age.
CREATE INDEX idx_outbox_terminal_updated ON outbox (updated_at) WHERE state IN ('sent', 'dead');
CREATE INDEX idx_outbox_topic ON outbox (topic);
