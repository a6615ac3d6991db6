-- The retention sweep of authorization tokens
-- (DeleteAuthorizationsExpiredBefore) removes tokens earliest expiry first,
-- through an index on their expiry (migration 12). The expiry is read from
-- the body, as migration 7 reads a settlement item's time: kassa_time_key
-- of the "expiresAt" text Go's encoding/json writes, so the index orders
-- and compares exactly as bbolt's authexp does, and it needs no column a
-- replica of an older build would not write. Inside a JSON string every
-- quote is escaped, and no object a token holds has a key of that name, so
-- the pattern matches the token's own expiry.
CREATE FUNCTION kassa_expires_at(body bytea) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT substring(convert_from(body, 'UTF8') FROM '"expiresAt":"([^"]+)"')
$$;
