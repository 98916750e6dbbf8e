-- Publishing without a client, and waking the outbox relay at once.
--
-- queuebox_publish(topic, payload, key, headers, max_attempts, delay_ms, aggregate_type)
-- inserts one outbox row in the caller's transaction and returns its id, so a trigger, a
-- stored procedure or any language can publish with plain SQL:
--     SELECT queuebox_publish('orders.created', '{"id": 7}', key => 'order-7');
-- It checks what the columns cannot (a blank topic, a JSON null payload, headers that are
-- not an object of strings, max_attempts < 1, a negative delay) and names the parameter;
-- header names QueueBox sets itself are dropped by the publishers at delivery. Applications
-- with a client library use its publish (the same row, rendered by the core).
CREATE FUNCTION queuebox_publish(
    topic          TEXT,
    payload        JSONB,
    key            TEXT    DEFAULT NULL,
    headers        JSONB   DEFAULT NULL,
    max_attempts   INTEGER DEFAULT 5,
    delay_ms       BIGINT  DEFAULT 0,
    aggregate_type TEXT    DEFAULT NULL
) RETURNS UUID
LANGUAGE plpgsql AS $$
DECLARE
    new_id UUID;
BEGIN
    IF topic IS NULL OR btrim(topic) = '' THEN
        RAISE EXCEPTION 'queuebox_publish: topic is required' USING ERRCODE = '22023';
    END IF;
    IF payload IS NULL OR jsonb_typeof(payload) = 'null' THEN
        RAISE EXCEPTION 'queuebox_publish: payload is required (JSON null is not a payload)' USING ERRCODE = '22023';
    END IF;
    IF headers IS NOT NULL AND (jsonb_typeof(headers) <> 'object'
        OR EXISTS (SELECT 1 FROM jsonb_each(headers) h WHERE jsonb_typeof(h.value) <> 'string')) THEN
        RAISE EXCEPTION 'queuebox_publish: headers must be a JSON object of strings' USING ERRCODE = '22023';
    END IF;
    IF max_attempts IS NULL OR max_attempts < 1 THEN
        RAISE EXCEPTION 'queuebox_publish: max_attempts must be at least 1' USING ERRCODE = '22023';
    END IF;
    IF delay_ms IS NULL OR delay_ms < 0 THEN
        RAISE EXCEPTION 'queuebox_publish: delay_ms must be 0 or more' USING ERRCODE = '22023';
    END IF;
    INSERT INTO outbox (topic, key, aggregate_type, payload, headers, max_attempts, scheduled_at)
    VALUES (queuebox_publish.topic, queuebox_publish.key, queuebox_publish.aggregate_type,
            queuebox_publish.payload, COALESCE(queuebox_publish.headers, '{}'),
            queuebox_publish.max_attempts,
            clock_timestamp() + make_interval(secs => queuebox_publish.delay_ms / 1000.0))
    RETURNING id INTO new_id;
    RETURN new_id;
END;
$$;

-- Wake the outbox relay within milliseconds of a commit: one NOTIFY per inserting statement
-- (not per row; PostgreSQL also folds identical notifications of one transaction into one),
-- delivered when the transaction commits, never for a rolled-back insert. The relay LISTENs
-- on channel queuebox_outbox; the payload is empty (the claim finds the rows).
CREATE FUNCTION queuebox_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('queuebox_outbox', '');
    RETURN NULL;
END;
$$;

CREATE TRIGGER trg_outbox_notify
    AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION queuebox_outbox_notify();
