-- Version 12 on SQL Server: queuebox_enqueue enqueues one pull row from plain SQL and returns
-- queuebox_enqueue_many's one-row result (n = 0, id, duplicate): the same checks, the same
-- insert, errors naming messages[0].<field>. (Not reshaped to (id, duplicate) through
-- INSERT … EXEC, which cannot nest: a caller could no longer INSERT … EXEC this procedure.)
--     EXEC queuebox_enqueue @source = N'emails', @idempotency_key = N'welcome-42',
--                           @payload = N'{"user": 42}', @priority = 10;
-- @idempotency_key NULL: a new row every time. Same as migrations/postgres/0012_inbox_enqueue.sql.
-- CREATE PROCEDURE must be alone in its batch: this file is that one statement.
CREATE PROCEDURE queuebox_enqueue (
    @source NVARCHAR(255),
    @idempotency_key NVARCHAR(255),
    @payload NVARCHAR(MAX),
    @aggregate_id NVARCHAR(255) = NULL,
    @headers NVARCHAR(MAX) = NULL,
    @priority INT = 0,
    @delay_ms BIGINT = 0,
    @scheduled_at DATETIME2 = NULL,
    @max_attempts INT = NULL,
    @event_type NVARCHAR(255) = NULL
)
AS
BEGIN
    SET NOCOUNT ON;
    DECLARE @qbMessages NVARCHAR(MAX) = CONCAT(N'[', (
        SELECT @source AS source, @idempotency_key AS idempotency_key, @payload AS payload,
               @aggregate_id AS aggregate_id, @headers AS headers, @priority AS priority,
               @delay_ms AS delay_ms, @scheduled_at AS scheduled_at, @max_attempts AS max_attempts,
               @event_type AS event_type
           FOR JSON PATH, WITHOUT_ARRAY_WRAPPER), N']');
    EXEC queuebox_enqueue_many @messages = @qbMessages;
END;
