-- kassa:no-transaction
-- A page of a settlement's transactions after fromId starts at that
-- transaction's seq, looked up by its id. Without an index on the id the
-- lookup read every transaction of the settlement: 32 ms for a page near the
-- end of 100 000, and a walk of the whole settlement (the CSV export, a
-- client paging through) cost the square of its size, 3.3 s against 0.4 s
-- on bolt, whose settletxid index does the same.
-- CONCURRENTLY: replicas of the older build go on saving settlements while
-- it is built.
CREATE INDEX CONCURRENTLY IF NOT EXISTS settlement_transactions_id ON settlement_transactions (merchant_id, settlement_id, id);
