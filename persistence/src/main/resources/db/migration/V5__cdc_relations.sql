-- The table shapes each pipeline has accepted, so that a schema change made while a pipeline was
-- stopped is still judged against what its sink last saw. Written after the transaction that
-- carried the shape was durably applied; accepted_lsn orders concurrent writes.
CREATE TABLE cdc_relation (
  pipeline     TEXT    NOT NULL,
  relation_id  BIGINT  NOT NULL,
  qualified    TEXT    NOT NULL,
  accepted_lsn pg_lsn  NOT NULL,
  definition   TEXT    NOT NULL,
  PRIMARY KEY (pipeline, relation_id)
);
