-- Version 4 on SQL Server: publishing without a client. queuebox_publish inserts one outbox
-- row in the caller's transaction and returns its id as a one-row result (`id`), so a
-- trigger, a stored procedure or any language can publish:
--     EXEC queuebox_publish @topic = N'orders.created', @payload = N'{"id": 7}', @key = N'order-7';
-- It checks what the columns cannot (a blank topic, a payload or headers that are not JSON,
-- max_attempts < 1, a delay out of range) with THROW 50400 naming the parameter; header
-- names QueueBox sets itself are dropped by the publishers at delivery. The PostgreSQL
-- NOTIFY trigger of this version has no SQL Server counterpart (the relay polls there).
-- CREATE PROCEDURE must be alone in its batch: this file is that one statement.
CREATE PROCEDURE queuebox_publish (
    @topic NVARCHAR(255),
    @payload NVARCHAR(MAX),
    @key NVARCHAR(255) = NULL,
    @headers NVARCHAR(MAX) = NULL,
    @max_attempts INT = 5,
    @delay_ms BIGINT = 0,
    @aggregate_type NVARCHAR(255) = NULL
)
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @qbId UNIQUEIDENTIFIER = NEWID();
    IF @topic IS NULL OR LTRIM(RTRIM(@topic)) = N''
    BEGIN
        THROW 50400, N'queuebox_publish: @topic is required', 1;
    END;
    IF @payload IS NULL OR ISJSON(@payload) = 0
    BEGIN
        THROW 50400, N'queuebox_publish: @payload must be JSON', 1;
    END;
    IF @headers IS NOT NULL AND (ISJSON(@headers) = 0 OR LEFT(LTRIM(@headers), 1) <> N'{')
    BEGIN
        THROW 50400, N'queuebox_publish: @headers must be a JSON object of strings', 1;
    END;
    IF @max_attempts IS NULL OR @max_attempts < 1
    BEGIN
        THROW 50400, N'queuebox_publish: @max_attempts must be at least 1', 1;
    END;
    IF @delay_ms IS NULL OR @delay_ms < 0 OR @delay_ms > 2147483647000
    BEGIN
        THROW 50400, N'queuebox_publish: @delay_ms must be between 0 and 2147483647000', 1;
    END;
    INSERT INTO outbox (id, topic, [key], aggregate_type, payload, headers, max_attempts, scheduled_at)
    VALUES (@qbId, @topic, @key, @aggregate_type, @payload, COALESCE(@headers, N'{}'), @max_attempts,
            DATEADD(millisecond, @delay_ms % 1000, DATEADD(second, @delay_ms / 1000, SYSUTCDATETIME())));
    SELECT @qbId AS id;
END;
