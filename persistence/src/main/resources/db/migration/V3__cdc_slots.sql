-- Slot incarnations: which replication slot each pipeline owns, and on which server. A checkpoint
-- or watermark is valid only for the incarnation it was taken in.
CREATE TABLE cdc_slot (
  pipeline          TEXT        PRIMARY KEY,
  slot_name         TEXT        NOT NULL,
  incarnation       UUID        NOT NULL,
  system_identifier NUMERIC(20) NOT NULL,
  timeline          INTEGER     NOT NULL,
  created_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
