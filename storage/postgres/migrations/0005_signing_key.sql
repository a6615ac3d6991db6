-- signing_key makes the replicas on one database sign access tokens,
-- document links and checkout links with one key (see Store.SigningKey).
-- key_check is an HMAC of the key, so a replica given another KASSA_KEY is
-- refused at start; key holds the key itself only when no replica was given
-- KASSA_KEY, so that replicas without one share the first one's key.
CREATE TABLE signing_key (
    id        smallint PRIMARY KEY CHECK (id = 1),
    key_check bytea NOT NULL,
    key       bytea
);
