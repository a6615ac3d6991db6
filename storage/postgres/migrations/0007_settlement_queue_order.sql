-- A settlement run reads the queue oldest first (occurred_key, then key),
-- so that a run reading only part of a large queue takes the oldest items
-- and none waits forever behind keys (random ids) that sort early.
-- occurred_key is the item's occurredAt as a 12-byte storage.AppendTimeKey:
-- seconds since the epoch with the sign bit flipped, then nanoseconds, both
-- big-endian, so ties order exactly as in bbolt.
--
-- kassa_time_key computes it from the RFC 3339 text Go's encoding/json
-- writes (fractional seconds of up to nine digits, then Z or an offset).
-- The fraction is cut off before the rest is parsed, as timestamptz keeps
-- microseconds and would round it. It backfills the rows queued before this
-- migration, and fills the column of a row a replica of an older build
-- inserts during a rolling upgrade (it does not write the column).
-- kassa_occurred_at finds the time in a body without casting it to jsonb,
-- which refuses a \u0000 escape that older builds may have stored in a
-- merchant's text: the migration must not stop a start over one row.
-- Inside a JSON string every quote is escaped, so the key's pattern only
-- matches the key itself.
CREATE FUNCTION kassa_time_key(ts text) RETURNS bytea
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT int8send(extract(epoch FROM regexp_replace(ts, '\.[0-9]+', '')::timestamptz)::bigint # (1::bigint << 63))
        || int4send(coalesce(rpad(substring(ts FROM '\.([0-9]+)'), 9, '0'), '0')::integer)
$$;

CREATE FUNCTION kassa_occurred_at(body bytea) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT substring(convert_from(body, 'UTF8') FROM '"occurredAt":"([^"]+)"')
$$;

ALTER TABLE settlement_queue ADD COLUMN occurred_key bytea;
UPDATE settlement_queue SET occurred_key = kassa_time_key(kassa_occurred_at(body));
ALTER TABLE settlement_queue ALTER COLUMN occurred_key SET NOT NULL;
-- Ties order by the key's bytes, as in bbolt, whatever the database's
-- collation (en_US would order "abc:void" after "abcd").
CREATE INDEX settlement_queue_occurred ON settlement_queue (occurred_key, key COLLATE "C");

CREATE FUNCTION kassa_settlement_queue_occurred() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.occurred_key := kassa_time_key(kassa_occurred_at(NEW.body));
    RETURN NEW;
END $$;
CREATE TRIGGER settlement_queue_occurred BEFORE INSERT ON settlement_queue
    FOR EACH ROW WHEN (NEW.occurred_key IS NULL) EXECUTE FUNCTION kassa_settlement_queue_occurred();
