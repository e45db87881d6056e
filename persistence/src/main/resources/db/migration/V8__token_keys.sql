-- The cluster's token-signing keys. New tokens are signed with the newest key not retired; tokens
-- signed with any key not retired still verify. An administrator rotates (adds a key) and retires
-- keys; the first key is the one generated with the cluster identity (table cluster).
CREATE TABLE token_keys (
  kid        TEXT        PRIMARY KEY CHECK (kid ~ '^[A-Za-z0-9_-]{1,32}$'),
  key        BYTEA       NOT NULL CHECK (octet_length(key) >= 32),
  created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
  retired_at TIMESTAMPTZ
);
INSERT INTO token_keys (kid, key, created_at) SELECT signing_kid, signing_key, created_at FROM cluster;
