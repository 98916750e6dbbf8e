-- The W3C trace context a message arrived with (issue 19), as columns of the inbox row: data
-- the relay validated and owns, never one of the sender's stored headers, so a sender cannot
-- forge it past the relay's header rules. NULL when the message had no valid traceparent.
-- traceparent is always the 55-character version-00 form; tracestate is kept up to the 512
-- characters W3C lets a receiver keep. Adding nullable columns without a default rewrites no
-- existing row.
ALTER TABLE inbox
    ADD COLUMN traceparent VARCHAR(55),
    ADD COLUMN tracestate  VARCHAR(512);
