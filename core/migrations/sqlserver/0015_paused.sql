-- Version 15 on SQL Server: the table of paused sources, destinations and topics
-- (migrations/postgres/0015_paused.sql). Pause and resume are PostgreSQL-only for now: on SQL
-- Server `queuebox pause` refuses, saying so, and no claim reads this table; it exists so both
-- backends keep the same versions and a later release can honour it without a migration. The
-- file runs in one transaction, so an interrupted run leaves nothing behind.
CREATE TABLE queuebox_paused (
    kind       VARCHAR(16)    NOT NULL,
    name       NVARCHAR(255)  NOT NULL,
    paused_at  DATETIME2      NOT NULL CONSTRAINT df_queuebox_paused_at DEFAULT SYSUTCDATETIME(),
    CONSTRAINT pk_queuebox_paused PRIMARY KEY (kind, name),
    CONSTRAINT ck_queuebox_paused_kind CHECK (kind IN ('source', 'destination', 'topic'))
);
