-- Wake idle pull workers within milliseconds: one NOTIFY per source per inserting statement
-- (not per row), delivered when the inserting transaction commits. The payload is the source
-- name; a worker listens on channel queuebox_inbox_pull and ignores other sources.
CREATE FUNCTION queuebox_inbox_pull_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('queuebox_inbox_pull', s.source)
    FROM (SELECT DISTINCT source FROM new_rows WHERE consumption = 'pull' AND state = 'pending') s;
    RETURN NULL;
END;
$$;

CREATE TRIGGER trg_inbox_pull_notify
    AFTER INSERT ON inbox
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION queuebox_inbox_pull_notify();
