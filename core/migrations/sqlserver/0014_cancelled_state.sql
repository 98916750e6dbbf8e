-- Version 14 on SQL Server: 'cancelled' joins the states of inbox and outbox, and the two
-- retention indexes cover it (migrations/postgres/0014_cancelled_state.sql). The file runs in
-- one transaction. The new constraints are added WITH NOCHECK: existing rows are not read
-- (they all hold one of the old states, which the new constraint allows), so the change is a
-- moment's schema lock rather than a scan; every later write is checked.
ALTER TABLE inbox DROP CONSTRAINT ck_inbox_state;
ALTER TABLE inbox WITH NOCHECK ADD CONSTRAINT ck_inbox_state
    CHECK (state IN ('pending', 'processing', 'processed', 'dead', 'cancelled'));
ALTER TABLE outbox DROP CONSTRAINT ck_outbox_state;
ALTER TABLE outbox WITH NOCHECK ADD CONSTRAINT ck_outbox_state
    CHECK (state IN ('pending', 'processing', 'sent', 'dead', 'cancelled'));
DROP INDEX idx_inbox_terminal_created ON inbox;
CREATE INDEX idx_inbox_terminal_created ON inbox (created_at) WHERE state IN ('processed', 'dead', 'cancelled');
DROP INDEX idx_outbox_terminal_updated ON outbox;
CREATE INDEX idx_outbox_terminal_updated ON outbox (updated_at) WHERE state IN ('sent', 'dead', 'cancelled');
