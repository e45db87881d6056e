-- One row per database: the cluster's identity and its token-signing key.
-- Generated once by whichever node starts first; every node of the cluster reads the same row.
CREATE TABLE cluster (
  singleton   BOOLEAN     PRIMARY KEY DEFAULT TRUE CHECK (singleton),
  cluster_id  UUID        NOT NULL,
  -- Key id of the current signing key, carried in every signed token so keys can rotate.
  signing_kid TEXT        NOT NULL,
  signing_key BYTEA       NOT NULL CHECK (octet_length(signing_key) >= 32),
  created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
