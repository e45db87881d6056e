-- The library checkpoint store: one row per pipeline, for sinks that cannot keep a checkpoint
-- atomically with their effects (files, HTTP, brokers). Written after the sink persisted.
CREATE TABLE cdc_checkpoint (
  pipeline    TEXT        PRIMARY KEY,
  incarnation TEXT        NOT NULL,
  commit_lsn  pg_lsn      NOT NULL,
  end_lsn     pg_lsn      NOT NULL,
  updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
