-- queuebox_enqueue_many(messages) again, same signature, same results and same errors as 0011
-- (read its header for the contract: one (n, id, duplicate) row per message, in order; a
-- stored (source, idempotency_key) returns the stored row's id as a duplicate), but faster
-- (benchmarks/enqueue.md):
--   * the checks are one set-based pass over the array instead of a plpgsql loop; the error is
--     the first bad message's, with the same text (plain-SQL callers rely on these checks; the
--     client libraries' core has already made them);
--   * when the INSERT stored a row for every message (the usual case) the result is the ids
--     this call made, with no lookup at all;
--   * otherwise each message's stored row is looked up by (source, idempotency_key) in a
--     scalar subquery: one probe of the unique index per message whatever the table's size
--     (0011's join was planned as a hash join over a full scan of inbox until the table was
--     large).
--
-- Races stay as 0011 handles them: under READ COMMITTED the INSERT waits for a concurrent
-- transaction holding the same key and, when that commits, skips the row; the lookup is a
-- later statement of this plpgsql function, so it takes a new snapshot and sees the committed
-- row. A stored row deleted between the two statements raises 40001 (retry the transaction).
--
-- Table names: like 0011 this reads and writes `inbox` as found through the search path; a
-- schema with custom names creates this function from this file (proto-docs/own-schema.md).
-- CREATE OR REPLACE keeps grants and dependants (0012's queuebox_enqueue) and lets the file
-- run again; it takes no lock on inbox.
CREATE OR REPLACE FUNCTION queuebox_enqueue_many(messages JSONB)
RETURNS TABLE (n INTEGER, id UUID, duplicate BOOLEAN)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    ids     UUID[];
    stored  UUID[];
    problem TEXT;
    want    INTEGER;
    made    INTEGER;
BEGIN
    IF messages IS NULL OR jsonb_typeof(messages) <> 'array' OR jsonb_array_length(messages) = 0 THEN
        RAISE EXCEPTION 'queuebox_enqueue: messages must be a non-empty JSON array' USING ERRCODE = '22023';
    END IF;
    want := jsonb_array_length(messages);

    -- One pass: each message's id (given, or made here) and the first failed check of the first
    -- bad message, checks in 0011's order.
    SELECT array_agg(c.id ORDER BY c.ord),
           (array_agg(c.problem ORDER BY c.ord) FILTER (WHERE c.problem IS NOT NULL))[1]
      INTO ids, problem
      FROM (SELECT e.ord, COALESCE(r.id, queuebox_uuid_v7()) AS id,
                   CASE
                   WHEN jsonb_typeof(e.v) <> 'object' THEN
                       format('messages[%s] must be a JSON object', e.ord - 1)
                   WHEN r.source IS NULL OR btrim(r.source) = '' THEN
                       format('messages[%s].source is required', e.ord - 1)
                   WHEN r.idempotency_key IS NOT NULL AND btrim(r.idempotency_key) = '' THEN
                       format('messages[%s].idempotency_key is blank (leave it out to have one made)', e.ord - 1)
                   WHEN r.payload IS NULL OR jsonb_typeof(r.payload) = 'null' THEN
                       format('messages[%s].payload is required (JSON null is not a payload)', e.ord - 1)
                   WHEN r.headers IS NOT NULL AND jsonb_typeof(r.headers) <> 'null' AND (jsonb_typeof(r.headers) <> 'object'
                       OR EXISTS (SELECT 1 FROM jsonb_each(r.headers) h WHERE jsonb_typeof(h.value) <> 'string')) THEN
                       format('messages[%s].headers must be a JSON object of strings', e.ord - 1)
                   WHEN r.priority IS NOT NULL AND (r.priority < -32767 OR r.priority > 32767) THEN
                       format('messages[%s].priority must be between -32767 and 32767', e.ord - 1)
                   WHEN r.max_attempts IS NOT NULL AND r.max_attempts < 1 THEN
                       format('messages[%s].max_attempts must be at least 1', e.ord - 1)
                   WHEN r.delay_ms IS NOT NULL AND r.delay_ms < 0 THEN
                       format('messages[%s].delay_ms must be 0 or more', e.ord - 1)
                   WHEN r.delay_ms IS NOT NULL AND r.delay_ms > 0 AND r.scheduled_at IS NOT NULL THEN
                       format('messages[%s]: give delay_ms or scheduled_at, not both', e.ord - 1)
                   END AS problem
              FROM jsonb_array_elements(messages) WITH ORDINALITY AS e(v, ord),
                   LATERAL jsonb_to_record(CASE WHEN jsonb_typeof(e.v) = 'object' THEN e.v ELSE '{}' END)
                       AS r(id UUID, source TEXT, idempotency_key TEXT, payload JSONB, headers JSONB,
                            priority INTEGER, max_attempts INTEGER, delay_ms FLOAT8, scheduled_at TIMESTAMPTZ)
           ) c;
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'queuebox_enqueue: %', problem USING ERRCODE = '22023';
    END IF;

    -- In array order, so `sequence` (an aggregate's order) follows the caller's order. Every
    -- element is an object now, so jsonb_to_recordset reads them all in one call.
    INSERT INTO inbox (id, source, idempotency_key, aggregate_id, event_type, correlation_id, payload,
                       headers, consumption, priority, max_attempts, scheduled_at)
    SELECT ids[r.ordinality], r.source, COALESCE(r.idempotency_key, ids[r.ordinality]::text), r.aggregate_id,
           r.event_type, r.correlation_id, r.payload,
           CASE WHEN jsonb_typeof(r.headers) = 'object' THEN r.headers ELSE '{}' END, 'pull',
           COALESCE(r.priority, 0), r.max_attempts,
           COALESCE(r.scheduled_at, clock_timestamp() + make_interval(secs => COALESCE(r.delay_ms, 0) / 1000))
      FROM ROWS FROM (jsonb_to_recordset(messages)
               AS (source TEXT, idempotency_key TEXT, aggregate_id TEXT, event_type TEXT, correlation_id TEXT,
                   payload JSONB, headers JSONB, priority SMALLINT, max_attempts INTEGER, delay_ms FLOAT8,
                   scheduled_at TIMESTAMPTZ)) WITH ORDINALITY AS r
     ORDER BY r.ordinality
    ON CONFLICT (source, idempotency_key) DO NOTHING;
    GET DIAGNOSTICS made = ROW_COUNT;

    IF made = want THEN
        -- A row stored for every message: each is this call's own, with the id it made.
        RETURN QUERY SELECT (o - 1)::INTEGER, ids[o], false FROM generate_series(1, want) AS o;
        RETURN;
    END IF;

    -- Some message's key was stored already (before, by a concurrent transaction that committed
    -- while the INSERT waited, or by an earlier message of this array). A new snapshot: every
    -- stored row of these keys. A scalar subquery, never flattened into a join, so each message
    -- is one probe of the (source, idempotency_key) unique index. A row whose id is not the one
    -- this call made for the message was there before: a duplicate.
    SELECT array_agg((SELECT i.id FROM inbox i
                       WHERE i.source = r.source
                         AND i.idempotency_key = COALESCE(r.idempotency_key, ids[r.ordinality]::text))
                     ORDER BY r.ordinality)
      INTO stored
      FROM ROWS FROM (jsonb_to_recordset(messages) AS (source TEXT, idempotency_key TEXT)) WITH ORDINALITY AS r;
    IF array_position(stored, NULL) IS NOT NULL THEN
        -- The stored row of a duplicate was deleted between the two statements (retention of
        -- a finished row): the transaction must run again, as after any serialization failure.
        RAISE EXCEPTION 'queuebox_enqueue: the stored row of a duplicate was deleted meanwhile; retry the transaction'
            USING ERRCODE = '40001';
    END IF;
    RETURN QUERY SELECT (o - 1)::INTEGER, stored[o], stored[o] <> ids[o] FROM generate_series(1, want) AS o;
END;
$$;
