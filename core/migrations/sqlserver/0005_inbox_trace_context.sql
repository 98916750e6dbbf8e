-- Version 5 on SQL Server: the W3C trace context a message arrived with, as columns of the
-- inbox row (the relay's own data, never one of the sender's stored headers). Same shape as
-- migrations/postgres/0005_inbox_trace_context.sql. Nullable columns without a default are a
-- metadata-only change.
ALTER TABLE inbox ADD traceparent VARCHAR(55) NULL;
ALTER TABLE inbox ADD tracestate VARCHAR(512) NULL;
