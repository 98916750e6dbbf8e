-- Time-ordered row ids (issue 21, "cost does not grow with history").
--
-- Every state change of a row (pending -> processing -> processed) is a non-HOT update:
-- `state` and `lease_expires_at` appear in the partial indexes, so PostgreSQL writes a new
-- entry for the new row version into every index, the primary key included, at the row's own
-- key. With gen_random_uuid() ids that key is anywhere in the primary key's B-tree, so with
-- millions of finished rows kept for retention each update touched a random leaf page that was
-- rarely in shared_buffers (10 M finished rows: drain rate 0.80 of an empty table's).
-- UUIDv7 ids (RFC 9562: 48-bit Unix milliseconds, version 7, 74 random bits) put the rows of
-- the last seconds next to each other at the right edge of the B-tree, which stays cached.
--
-- Built from gen_random_uuid() (whose variant bits are already RFC 9562's) so that it runs on
-- every supported PostgreSQL; PostgreSQL 18's uuidv7() is the same layout. Rows that already
-- exist keep their ids, and an application that supplies its own id (any UUID) still may.
CREATE OR REPLACE FUNCTION queuebox_uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(
        -- version nibble 0100 (v4) -> 0111 (v7): bits 52 and 53 of the 128
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;

ALTER TABLE inbox ALTER COLUMN id SET DEFAULT queuebox_uuid_v7();
ALTER TABLE outbox ALTER COLUMN id SET DEFAULT queuebox_uuid_v7();
