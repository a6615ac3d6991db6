-- kassa:no-transaction
-- The authorization tokens' retention sweep walks this index from the
-- earliest expiry, so it reads no more rows than it removes. An index on
-- the body's expiry (migration 11), not a column: a token an older replica
-- puts during a rolling upgrade is indexed all the same, and a deleted id
-- put again as a new token moves with its body.
-- CONCURRENTLY: replicas of the older build go on minting and using tokens
-- while it is built.
CREATE INDEX CONCURRENTLY IF NOT EXISTS auth_tokens_expires ON auth_tokens (kassa_time_key(kassa_expires_at(body)));
