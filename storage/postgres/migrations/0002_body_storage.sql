-- Record bodies are JSON of a few to some tens of kilobytes, rewritten on
-- every change. Compressing each version with pglz (the default) cost a
-- capture more CPU than lz4 does (docs/postgres.md); servers built without
-- lz4 keep the default.
DO $$
BEGIN
    ALTER TABLE orders ALTER COLUMN body SET COMPRESSION lz4;
    ALTER TABLE idempotency ALTER COLUMN body SET COMPRESSION lz4;
    ALTER TABLE sessions ALTER COLUMN body SET COMPRESSION lz4;
    ALTER TABLE outbox ALTER COLUMN body SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 is not available: record bodies keep the default compression';
END $$;
