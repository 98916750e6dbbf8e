-- The outbox: rows committed with the application's business write, delivered at least once.
-- States: pending -> processing -> sent | pending (retry, reclaim) | dead.
CREATE SEQUENCE IF NOT EXISTS outbox_sequence_seq;

CREATE TABLE outbox (
    id               UUID         PRIMARY KEY DEFAULT gen_random_uuid(),
    topic            VARCHAR(255) NOT NULL,
    key              VARCHAR(255),
    aggregate_type   VARCHAR(255),
    payload          JSONB        NOT NULL,
    headers          JSONB        NOT NULL DEFAULT '{}',
    state            VARCHAR(50)  NOT NULL DEFAULT 'pending'
                     CONSTRAINT ck_outbox_state CHECK (state IN ('pending', 'processing', 'sent', 'dead')),
    attempt          INTEGER      NOT NULL DEFAULT 0,
    max_attempts     INTEGER      NOT NULL DEFAULT 5,
    scheduled_at     TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP,
    created_at       TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at       TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP,
    claimed_at       TIMESTAMPTZ,
    claim_token      UUID,
    lease_expires_at TIMESTAMPTZ,
    last_error       TEXT,
    sequence         BIGINT       NOT NULL DEFAULT nextval('outbox_sequence_seq')
);

ALTER SEQUENCE outbox_sequence_seq OWNED BY outbox.sequence;

-- The claim scans due pending rows in (scheduled_at, sequence) order.
CREATE INDEX idx_outbox_pending_scheduled ON outbox (scheduled_at, sequence) WHERE state = 'pending';
-- Reclaim finds processing rows whose lease ran out.
CREATE INDEX idx_outbox_processing_lease ON outbox (lease_expires_at) WHERE state = 'processing';
-- The key head rule: is there an earlier live row with the same key?
CREATE INDEX idx_outbox_key_sequence ON outbox (key, sequence) WHERE state IN ('pending', 'processing');
-- Retention deletes terminal rows by age.
CREATE INDEX idx_outbox_terminal_updated ON outbox (updated_at) WHERE state IN ('sent', 'dead');
CREATE INDEX idx_outbox_topic ON outbox (topic);
