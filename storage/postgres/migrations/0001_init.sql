-- kassa's schema, version 1. Records are stored as the JSON of the domain
-- structs (body, bytea: exact bytes, no jsonb normalisation); the columns
-- beside them are what lookups, lists and background jobs filter and sort
-- by. Times used for ordering are 12-byte keys (storage.AppendTimeKey) so
-- that nanoseconds and the order of ties match the embedded store.

CREATE TABLE merchants (
    id        text PRIMARY KEY,
    client_id text NOT NULL UNIQUE,
    body      bytea NOT NULL
);

CREATE TABLE orders (
    merchant_id  text   NOT NULL,
    id           text   NOT NULL,
    version      bigint NOT NULL,
    store_id     text   NOT NULL,
    order_ref    text   NOT NULL,
    merchant_ref text   NOT NULL,
    category     text   NOT NULL,
    statuses     text[] NOT NULL,
    created_key  bytea  NOT NULL,
    expires_key  bytea  NOT NULL,
    expirable    boolean NOT NULL,
    body         bytea  NOT NULL,
    PRIMARY KEY (merchant_id, id)
);
-- Newest-first lists, alone and per filter.
CREATE INDEX orders_created ON orders (merchant_id, created_key DESC, id DESC);
CREATE INDEX orders_store ON orders (merchant_id, store_id, created_key DESC, id DESC);
CREATE INDEX orders_order_ref ON orders (merchant_id, order_ref, created_key DESC, id DESC) WHERE order_ref <> '';
CREATE INDEX orders_merchant_ref ON orders (merchant_id, merchant_ref, created_key DESC, id DESC) WHERE merchant_ref <> '';
CREATE INDEX orders_category ON orders (merchant_id, category, created_key DESC, id DESC);
CREATE INDEX orders_statuses ON orders USING gin (statuses);
CREATE INDEX orders_expires ON orders (merchant_id, expires_key);
-- The expiry job: only orders that can still expire.
CREATE INDEX orders_expirable ON orders (expires_key) WHERE expirable;

CREATE TABLE auth_tokens (
    merchant_id text NOT NULL,
    token       text NOT NULL,
    body        bytea NOT NULL,
    PRIMARY KEY (merchant_id, token)
);

CREATE TABLE customer_tokens (
    merchant_id text NOT NULL,
    id          text NOT NULL,
    body        bytea NOT NULL,
    PRIMARY KEY (merchant_id, id)
);

CREATE TABLE sessions (
    merchant_id text NOT NULL,
    id          text NOT NULL,
    external_id text,
    order_id    text,
    created_key bytea NOT NULL,
    body        bytea NOT NULL,
    PRIMARY KEY (merchant_id, id)
);
CREATE UNIQUE INDEX sessions_external ON sessions (merchant_id, external_id) WHERE external_id IS NOT NULL;
CREATE UNIQUE INDEX sessions_order ON sessions (merchant_id, order_id) WHERE order_id IS NOT NULL;
CREATE INDEX sessions_created ON sessions (merchant_id, created_key DESC, id DESC);

CREATE TABLE settlement_queue (
    key  text PRIMARY KEY,
    body bytea NOT NULL
);

CREATE TABLE settlements (
    merchant_id text NOT NULL,
    id          text NOT NULL,
    created_key bytea NOT NULL,
    body        bytea NOT NULL,
    PRIMARY KEY (merchant_id, id)
);
CREATE INDEX settlements_created ON settlements (merchant_id, created_key DESC, id DESC);

CREATE TABLE settlement_transactions (
    merchant_id   text    NOT NULL,
    settlement_id text    NOT NULL,
    seq           integer NOT NULL,
    id            text    NOT NULL,
    body          bytea   NOT NULL,
    PRIMARY KEY (merchant_id, settlement_id, seq)
);

CREATE TABLE tasks (
    id      text PRIMARY KEY,
    due_key bytea NOT NULL,
    body    bytea NOT NULL
);
CREATE INDEX tasks_due ON tasks (due_key, id);

CREATE TABLE sequences (
    merchant_id text   NOT NULL,
    series      text   NOT NULL,
    value       bigint NOT NULL,
    PRIMARY KEY (merchant_id, series)
);

CREATE TABLE idempotency (
    merchant_id text  NOT NULL,
    key         text  NOT NULL,
    expires_key bytea NOT NULL,
    body        bytea NOT NULL,
    PRIMARY KEY (merchant_id, key)
);
CREATE INDEX idempotency_expires ON idempotency (expires_key);

CREATE TABLE outbox (
    id          text    PRIMARY KEY,
    merchant_id text    NOT NULL,
    created_key bytea   NOT NULL,
    next_key    bytea   NOT NULL,
    done        boolean NOT NULL,
    body        bytea   NOT NULL
);
CREATE INDEX outbox_pending ON outbox (next_key, id) WHERE NOT done;
CREATE INDEX outbox_merchant ON outbox (merchant_id, created_key DESC, id DESC);
