-- The session list's filters (docs/sessions.md) each have an index: store,
-- merchant reference and update time (a 12-byte key, like created_key) are
-- kept beside the body. Store and reference indexes end in the list's order,
-- so one value's sessions come newest first without a sort. Rows written
-- before are filled right after this migration, in Go and under the same
-- lock (fillSessionColumns), as reading the body in SQL would fail on text
-- jsonb cannot hold; sessions_unfilled finds them (and any row an older
-- build inserts later, filled at the next start).
ALTER TABLE sessions ADD COLUMN store_id text, ADD COLUMN merchant_ref text, ADD COLUMN updated_key bytea;
CREATE INDEX sessions_store ON sessions (merchant_id, store_id, created_key DESC, id DESC);
CREATE INDEX sessions_merchant_ref ON sessions (merchant_id, merchant_ref, created_key DESC, id DESC);
CREATE INDEX sessions_updated ON sessions (merchant_id, updated_key);
CREATE INDEX sessions_unfilled ON sessions (merchant_id, id) WHERE updated_key IS NULL;
