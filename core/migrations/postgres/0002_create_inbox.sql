-- The inbox: every received message stored once, deduplicated on (source, idempotency_key).
-- States: pending -> processing -> processed | pending (retry, reclaim) | dead.
-- consumption is fixed at receipt: push rows are moved by the relay, pull rows by a worker.
CREATE SEQUENCE IF NOT EXISTS inbox_sequence_seq;

CREATE TABLE inbox (
    id               UUID         PRIMARY KEY DEFAULT gen_random_uuid(),
    source           VARCHAR(255) NOT NULL,
    idempotency_key  VARCHAR(255) NOT NULL,
    aggregate_id     VARCHAR(255),
    event_type       VARCHAR(255),
    payload          JSONB        NOT NULL,
    headers          JSONB        NOT NULL DEFAULT '{}',
    state            VARCHAR(50)  NOT NULL DEFAULT 'pending'
                     CONSTRAINT ck_inbox_state CHECK (state IN ('pending', 'processing', 'processed', 'dead')),
    consumption      VARCHAR(4)   NOT NULL DEFAULT 'push'
                     CONSTRAINT ck_inbox_consumption CHECK (consumption IN ('push', 'pull')),
    attempt          INTEGER      NOT NULL DEFAULT 0,
    scheduled_at     TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP,
    created_at       TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP,
    processed_at     TIMESTAMPTZ,
    claimed_at       TIMESTAMPTZ,
    claim_token      UUID,
    lease_expires_at TIMESTAMPTZ,
    last_error       TEXT,
    correlation_id   VARCHAR(128),
    -- Arrival order: created_at ties inside one transaction, this never does.
    sequence         BIGINT       NOT NULL DEFAULT nextval('inbox_sequence_seq'),
    CONSTRAINT uq_inbox_source_idempotency UNIQUE (source, idempotency_key)
);

ALTER SEQUENCE inbox_sequence_seq OWNED BY inbox.sequence;

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
