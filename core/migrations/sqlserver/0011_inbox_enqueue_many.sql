-- Version 11 on SQL Server: queuebox_enqueue_many stores pull rows from @messages, a JSON
-- array of {"id", "source", "idempotency_key", "payload", "aggregate_id", "event_type",
-- "correlation_id", "headers", "priority", "max_attempts", "delay_ms", "scheduled_at"} (only
-- source and payload required; payload and headers as JSON text, as the core renders them),
-- in the caller's transaction, and returns one row per message in order: (n, id, duplicate).
-- A message whose (source, idempotency_key) is stored already (by an earlier or a concurrent
-- transaction, or an earlier message of the array) inserts nothing and returns the stored
-- row's id with duplicate = 1. Same contract as migrations/postgres/0011_inbox_enqueue_many.sql.
-- The existence check holds UPDLOCK, HOLDLOCK on the key's range, as the relay's INSERT does:
-- a concurrent enqueue of the same key waits for this transaction, then sees its row.
-- Errors are THROW 50400 naming messages[n].<field>. An absent idempotency key becomes the
-- row's id as text. CREATE PROCEDURE must be alone in its batch: this file is that statement.
CREATE PROCEDURE queuebox_enqueue_many (@messages NVARCHAR(MAX))
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @qbBad NVARCHAR(400);
    IF @messages IS NULL OR ISJSON(@messages) = 0 OR LEFT(LTRIM(@messages), 1) <> N'['
    BEGIN
        THROW 50400, N'queuebox_enqueue: messages must be a non-empty JSON array', 1;
    END;
    DECLARE @qbMsgs TABLE (
        n               INT              NOT NULL PRIMARY KEY,
        id              UNIQUEIDENTIFIER NOT NULL,
        source          NVARCHAR(255)    NULL,
        k               NVARCHAR(255)    NULL,
        given_key       NVARCHAR(255)    NULL,
        payload         NVARCHAR(MAX)    NULL,
        aggregate_id    NVARCHAR(255)    NULL,
        event_type      NVARCHAR(255)    NULL,
        correlation_id  NVARCHAR(128)    NULL,
        headers         NVARCHAR(MAX)    NULL,
        priority        INT              NULL,
        max_attempts    INT              NULL,
        delay_ms        BIGINT           NULL,
        scheduled_at    DATETIME2        NULL
    );
    INSERT INTO @qbMsgs (n, id, source, given_key, payload, aggregate_id, event_type, correlation_id,
                         headers, priority, max_attempts, delay_ms, scheduled_at)
    SELECT CAST(j.[key] AS INT), COALESCE(m.id, NEWID()), m.source, m.idempotency_key, m.payload,
           m.aggregate_id, m.event_type, m.correlation_id, m.headers, m.priority, m.max_attempts,
           m.delay_ms, m.scheduled_at
      FROM OPENJSON(@messages) AS j
     CROSS APPLY OPENJSON(j.[value]) WITH (
           id UNIQUEIDENTIFIER '$.id', source NVARCHAR(255) '$.source',
           idempotency_key NVARCHAR(255) '$.idempotency_key', payload NVARCHAR(MAX) '$.payload',
           aggregate_id NVARCHAR(255) '$.aggregate_id', event_type NVARCHAR(255) '$.event_type',
           correlation_id NVARCHAR(128) '$.correlation_id', headers NVARCHAR(MAX) '$.headers',
           priority INT '$.priority', max_attempts INT '$.max_attempts', delay_ms BIGINT '$.delay_ms',
           scheduled_at DATETIME2 '$.scheduled_at') AS m;
    IF NOT EXISTS (SELECT 1 FROM @qbMsgs)
    BEGIN
        THROW 50400, N'queuebox_enqueue: messages must be a non-empty JSON array', 1;
    END;
    UPDATE @qbMsgs SET k = COALESCE(given_key, LOWER(CONVERT(NVARCHAR(36), id)));
    SELECT TOP 1 @qbBad = CONCAT(N'queuebox_enqueue: messages[', n, N'].',
           CASE WHEN source IS NULL OR LTRIM(RTRIM(source)) = N'' THEN N'source is required'
                WHEN given_key IS NOT NULL AND LTRIM(RTRIM(given_key)) = N'' THEN N'idempotency_key is blank (leave it out to have one made)'
                WHEN payload IS NULL OR ISJSON(payload) = 0 THEN N'payload must be JSON text'
                WHEN headers IS NOT NULL AND (ISJSON(headers) = 0 OR LEFT(LTRIM(headers), 1) <> N'{') THEN N'headers must be a JSON object of strings'
                WHEN priority < -32767 OR priority > 32767 THEN N'priority must be between -32767 and 32767'
                WHEN max_attempts < 1 THEN N'max_attempts must be at least 1'
                WHEN delay_ms < 0 OR delay_ms > 2147483647000 THEN N'delay_ms must be between 0 and 2147483647000'
                ELSE N'delay_ms: give delay_ms or scheduled_at, not both' END)
      FROM @qbMsgs
     WHERE source IS NULL OR LTRIM(RTRIM(source)) = N''
        OR (given_key IS NOT NULL AND LTRIM(RTRIM(given_key)) = N'')
        OR payload IS NULL OR ISJSON(payload) = 0
        OR (headers IS NOT NULL AND (ISJSON(headers) = 0 OR LEFT(LTRIM(headers), 1) <> N'{'))
        OR priority < -32767 OR priority > 32767 OR max_attempts < 1
        OR delay_ms < 0 OR delay_ms > 2147483647000
        OR (delay_ms > 0 AND scheduled_at IS NOT NULL)
     ORDER BY n;
    IF @qbBad IS NOT NULL
    BEGIN
        THROW 50400, @qbBad, 1;
    END;
    INSERT INTO inbox (id, source, idempotency_key, aggregate_id, event_type, correlation_id, payload,
                       headers, consumption, priority, max_attempts, scheduled_at)
    SELECT m.id, m.source, m.k, m.aggregate_id, m.event_type, m.correlation_id, m.payload,
           COALESCE(m.headers, N'{}'), 'pull', COALESCE(m.priority, 0), m.max_attempts,
           COALESCE(m.scheduled_at, DATEADD(millisecond, COALESCE(m.delay_ms, 0) % 1000,
                                    DATEADD(second, COALESCE(m.delay_ms, 0) / 1000, SYSUTCDATETIME())))
      FROM @qbMsgs AS m
     WHERE m.n = (SELECT MIN(f.n) FROM @qbMsgs AS f WHERE f.source = m.source AND f.k = m.k)
       AND NOT EXISTS (SELECT 1 FROM inbox AS i WITH (UPDLOCK, HOLDLOCK)
                        WHERE i.source = m.source AND i.idempotency_key = m.k)
     ORDER BY m.n;
    SELECT m.n, i.id, CAST(CASE WHEN i.id = m.id THEN 0 ELSE 1 END AS BIT) AS duplicate
      FROM @qbMsgs AS m
      JOIN inbox AS i ON i.source = m.source AND i.idempotency_key = m.k
     ORDER BY m.n;
END;
