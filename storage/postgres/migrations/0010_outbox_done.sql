-- kassa:no-transaction
-- The retention sweep of the delivery log (DeleteDoneOutbox) removes done
-- messages oldest first. This index holds done messages only, so the sweep
-- reads no pending message and no more rows than it removes, however many
-- are pending.
-- CONCURRENTLY: replicas of the older build go on writing notifications
-- while it is built.
CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_done ON outbox (created_key, id) WHERE done;
