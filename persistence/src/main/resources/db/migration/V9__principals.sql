-- Principals: callers with a bearer token (kept as its SHA-256 only) and their grants per collection.
-- Every node reads them; a change advances the principal's policy epoch (cursors bind it).
CREATE TABLE principals (
  id            TEXT        PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9_.@-]{1,64}$'),
  token_hash    BYTEA       NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
  administrator BOOLEAN     NOT NULL DEFAULT false,
  policy_epoch  BIGINT      NOT NULL DEFAULT 1,
  created_at    TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp(),
  revoked_at    TIMESTAMPTZ
);
CREATE TABLE grants (
  principal_id TEXT NOT NULL REFERENCES principals (id),
  collection   TEXT NOT NULL CHECK (collection ~ '^[A-Za-z0-9_.-]{1,128}$'),
  grant_name   TEXT NOT NULL CHECK (grant_name IN ('DocumentsRead', 'DocumentsWrite', 'ChangesRead', 'QueryRead')),
  PRIMARY KEY (principal_id, collection, grant_name)
);
