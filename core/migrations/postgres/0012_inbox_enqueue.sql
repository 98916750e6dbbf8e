-- queuebox_enqueue(source, idempotency_key, payload, …) enqueues one pull row from plain SQL
-- (a trigger, a stored procedure, psql) and returns (id, duplicate):
--     SELECT * FROM queuebox_enqueue('emails', 'welcome-42', '{"user": 42}', priority => 10);
-- The same checks and the same insert as queuebox_enqueue_many, whose errors name the field
-- as messages[0].<field>. idempotency_key NULL: a new row every time.
CREATE FUNCTION queuebox_enqueue(
    source          TEXT,
    idempotency_key TEXT,
    payload         JSONB,
    aggregate_id    TEXT        DEFAULT NULL,
    headers         JSONB       DEFAULT NULL,
    priority        INTEGER     DEFAULT 0,
    delay_ms        BIGINT      DEFAULT 0,
    scheduled_at    TIMESTAMPTZ DEFAULT NULL,
    max_attempts    INTEGER     DEFAULT NULL,
    event_type      TEXT        DEFAULT NULL
) RETURNS TABLE (id UUID, duplicate BOOLEAN)
LANGUAGE sql VOLATILE AS $$
    SELECT e.id, e.duplicate
      FROM queuebox_enqueue_many(jsonb_build_array(jsonb_build_object(
               'source', source, 'idempotency_key', idempotency_key, 'payload', payload,
               'aggregate_id', aggregate_id, 'headers', headers, 'priority', priority,
               'delay_ms', delay_ms, 'scheduled_at', scheduled_at, 'max_attempts', max_attempts,
               'event_type', event_type))) AS e
$$;
