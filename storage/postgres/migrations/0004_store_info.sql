-- store_info holds facts about how the data was written that are not a
-- schema change: statusRules is the order.StatusRules the orders' statuses
-- column was computed with; statusRulesSweep is a sweep to value under way,
-- with the last (merchant_id, id) it finished as position (see
-- reindexStatuses).
CREATE TABLE store_info (
    name     text PRIMARY KEY,
    value    bigint NOT NULL,
    position text NOT NULL DEFAULT ''
);
