-- queuebox_enqueue_many(messages) stores pull rows from a JSON array of
--   {"id", "source", "idempotency_key", "payload", "aggregate_id", "event_type",
--    "correlation_id", "headers", "priority", "max_attempts", "delay_ms", "scheduled_at"}
-- (only source and payload required) in the caller's transaction and returns one row per
-- message, in order: (n, id, duplicate). A message whose (source, idempotency_key) is stored
-- already, by an earlier transaction, a concurrent one that committed meanwhile, or an earlier
-- message of the same array, inserts nothing and returns the stored row's id with duplicate =
-- true. The client libraries' enqueue runs this function with the array the core renders
-- (queuebox_core::app_tx::enqueue_statement), after the core checked every field.
--
-- Why two statements: under READ COMMITTED the INSERT … ON CONFLICT DO NOTHING waits for a
-- concurrent transaction that inserted the same key and, when that one commits, skips the row;
-- a SELECT in the same statement uses the statement's snapshot, taken before that commit, and
-- cannot see the stored row. Each statement of a plpgsql function takes a new snapshot, so
-- the SELECT after the INSERT does. Under REPEATABLE READ or SERIALIZABLE the INSERT itself
-- fails with a serialization failure (40001) in that race: retry the transaction.
--
-- An absent idempotency key becomes the row's id as text (every such row is new). The id is
-- the one given (the core makes UUIDv7 ids) or queuebox_uuid_v7().
CREATE FUNCTION queuebox_enqueue_many(messages JSONB)
RETURNS TABLE (n INTEGER, id UUID, duplicate BOOLEAN)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    m     RECORD;
    ids   UUID[] := '{}';
    want  INTEGER;
    found INTEGER;
BEGIN
    IF messages IS NULL OR jsonb_typeof(messages) <> 'array' OR jsonb_array_length(messages) = 0 THEN
        RAISE EXCEPTION 'queuebox_enqueue: messages must be a non-empty JSON array' USING ERRCODE = '22023';
    END IF;
    FOR m IN
        SELECT e.ord - 1 AS i, e.v, r.*
          FROM jsonb_array_elements(messages) WITH ORDINALITY AS e(v, ord),
               LATERAL jsonb_to_record(CASE WHEN jsonb_typeof(e.v) = 'object' THEN e.v ELSE '{}' END)
                   AS r(id UUID, source TEXT, idempotency_key TEXT, payload JSONB, headers JSONB,
                        priority INTEGER, max_attempts INTEGER, delay_ms FLOAT8, scheduled_at TIMESTAMPTZ)
         ORDER BY e.ord
    LOOP
        IF jsonb_typeof(m.v) <> 'object' THEN
            RAISE EXCEPTION 'queuebox_enqueue: messages[%] must be a JSON object', m.i USING ERRCODE = '22023';
        END IF;
        IF m.source IS NULL OR btrim(m.source) = '' THEN
            RAISE EXCEPTION 'queuebox_enqueue: messages[%].source is required', m.i USING ERRCODE = '22023';
        END IF;
        IF m.idempotency_key IS NOT NULL AND btrim(m.idempotency_key) = '' THEN
            RAISE EXCEPTION 'queuebox_enqueue: messages[%].idempotency_key is blank (leave it out to have one made)', m.i USING ERRCODE = '22023';
        END IF;
        IF m.payload IS NULL OR jsonb_typeof(m.payload) = 'null' THEN
            RAISE EXCEPTION 'queuebox_enqueue: messages[%].payload is required (JSON null is not a payload)', m.i USING ERRCODE = '22023';
        END IF;
        IF m.headers IS NOT NULL AND jsonb_typeof(m.headers) <> 'null' AND (jsonb_typeof(m.headers) <> 'object'
            OR EXISTS (SELECT 1 FROM jsonb_each(m.headers) h WHERE jsonb_typeof(h.value) <> 'string')) THEN
            RAISE EXCEPTION 'queuebox_enqueue: messages[%].headers must be a JSON object of strings', m.i USING ERRCODE = '22023';
        END IF;
        IF m.priority IS NOT NULL AND (m.priority < -32767 OR m.priority > 32767) THEN
            RAISE EXCEPTION 'queuebox_enqueue: messages[%].priority must be between -32767 and 32767', m.i USING ERRCODE = '22023';
        END IF;
        IF m.max_attempts IS NOT NULL AND m.max_attempts < 1 THEN
            RAISE EXCEPTION 'queuebox_enqueue: messages[%].max_attempts must be at least 1', m.i USING ERRCODE = '22023';
        END IF;
        IF m.delay_ms IS NOT NULL AND m.delay_ms < 0 THEN
            RAISE EXCEPTION 'queuebox_enqueue: messages[%].delay_ms must be 0 or more', m.i USING ERRCODE = '22023';
        END IF;
        IF m.delay_ms IS NOT NULL AND m.delay_ms > 0 AND m.scheduled_at IS NOT NULL THEN
            RAISE EXCEPTION 'queuebox_enqueue: messages[%]: give delay_ms or scheduled_at, not both', m.i USING ERRCODE = '22023';
        END IF;
        ids := ids || COALESCE(m.id, queuebox_uuid_v7());
    END LOOP;

    -- In array order, so `sequence` (an aggregate's order) follows the caller's order.
    INSERT INTO inbox (id, source, idempotency_key, aggregate_id, event_type, correlation_id, payload,
                       headers, consumption, priority, max_attempts, scheduled_at)
    SELECT ids[e.ord], r.source, COALESCE(r.idempotency_key, ids[e.ord]::text), r.aggregate_id,
           r.event_type, r.correlation_id, r.payload,
           CASE WHEN jsonb_typeof(r.headers) = 'object' THEN r.headers ELSE '{}' END, 'pull',
           COALESCE(r.priority, 0), r.max_attempts,
           COALESCE(r.scheduled_at, clock_timestamp() + make_interval(secs => COALESCE(r.delay_ms, 0) / 1000))
      FROM jsonb_array_elements(messages) WITH ORDINALITY AS e(v, ord),
           LATERAL jsonb_to_record(e.v)
               AS r(source TEXT, idempotency_key TEXT, aggregate_id TEXT, event_type TEXT, correlation_id TEXT,
                    payload JSONB, headers JSONB, priority SMALLINT, max_attempts INTEGER, delay_ms FLOAT8,
                    scheduled_at TIMESTAMPTZ)
     ORDER BY e.ord
    ON CONFLICT (source, idempotency_key) DO NOTHING;

    -- A new snapshot: every stored row of these keys, this statement's or a concurrent
    -- transaction's that committed while the INSERT waited for it. A row whose id is not the
    -- one this call made for the message was there before: a duplicate.
    want := cardinality(ids);
    RETURN QUERY
    SELECT (e.ord - 1)::INTEGER, i.id, i.id <> ids[e.ord]
      FROM jsonb_array_elements(messages) WITH ORDINALITY AS e(v, ord)
           CROSS JOIN LATERAL jsonb_to_record(e.v) AS r(source TEXT, idempotency_key TEXT)
           JOIN inbox i ON i.source = r.source
                       AND i.idempotency_key = COALESCE(r.idempotency_key, ids[e.ord]::text)
     ORDER BY e.ord;
    GET DIAGNOSTICS found = ROW_COUNT;
    IF found <> want THEN
        -- The stored row of a duplicate was deleted between the two statements (retention of
        -- a finished row): the transaction must run again, as after any serialization failure.
        RAISE EXCEPTION 'queuebox_enqueue: the stored row of a duplicate was deleted meanwhile; retry the transaction'
            USING ERRCODE = '40001';
    END IF;
END;
$$;
