-- Version 10 on SQL Server: pull rows with a priority and a dead-letter ceiling of their own
-- (issue 38). Same columns as migrations/postgres/0010_inbox_priority.sql:
--   priority      within a pull source a higher priority is claimed first; an aggregate keeps
--                 its arrival order whatever the priorities. -32767 to 32767; 0 by default.
--   max_attempts  the dead-letter ceiling of this row; NULL: the worker's retry policy's.
-- Adding a NOT NULL column with a constant default is a metadata-only change on SQL Server
-- 2012 and later (Enterprise edition and Azure SQL; other editions write the default into
-- every row); a nullable column without a default always is.
ALTER TABLE inbox ADD priority SMALLINT NOT NULL CONSTRAINT df_inbox_priority DEFAULT 0;
ALTER TABLE inbox ADD max_attempts INT NULL;
