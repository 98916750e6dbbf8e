-- Pause and resume at runtime: one row per paused thing, written by
-- `queuebox pause` / `POST /admin/pause/...` and deleted by resume. `kind` is
--   source       a pull source (every worker's claim skips it) or a push source (the inbox
--                relay's claim skips it);
--   destination  an outbox destination of the relay's configuration (the outbox relay skips
--                the topics routed to it);
--   topic        one outbox topic.
-- Rows keep arriving and stay pending while paused; a row already claimed finishes normally.
-- Every claim reads this table (store/postgres/sql.rs), so a pause holds for every relay
-- replica and every worker process, in every language, from its next claim.
--
-- A new table, created in the migration's transaction: no existing table is locked or read,
-- and IF NOT EXISTS lets the file run again after an interruption.
CREATE TABLE IF NOT EXISTS queuebox_paused (
    kind       VARCHAR(16)  NOT NULL,
    name       VARCHAR(255) NOT NULL,
    paused_at  TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT pk_queuebox_paused PRIMARY KEY (kind, name),
    CONSTRAINT ck_queuebox_paused_kind CHECK (kind IN ('source', 'destination', 'topic'))
);
