-- A claim takes at most a few due messages of each merchant (PendingOutbox's
-- perMerchant), so that one merchant's backlog cannot hide the others'
-- messages behind it. This index serves both halves of that query: a skip
-- scan over the merchants with pending messages, and each one's oldest due.
-- outbox_pending stays for replicas of an older build during a rolling
-- upgrade; a later migration can drop it.
CREATE INDEX outbox_merchant_pending ON outbox (merchant_id, next_key, id) WHERE NOT done;
