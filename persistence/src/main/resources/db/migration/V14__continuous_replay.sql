-- The replay log of continuous queries (docs/continuous.md, "Replay log"): every event a session
-- sends, appended before it is sent and before the transaction it comes from is acknowledged.
-- Sequences are per subscription, contiguous and never reused, also across restarts and nodes: a
-- session starting anywhere continues after the highest stored sequence (with a fresh
-- InitialResult). A retried append must carry the same bytes; another event at a taken sequence is
-- refused. Old events are pruned beyond weir.continuous.replay-retained per subscription.
CREATE TABLE continuous_replay (
  id        TEXT   NOT NULL REFERENCES continuous_query (id) ON DELETE CASCADE,
  sequence  BIGINT NOT NULL CHECK (sequence > 0),
  type      TEXT   NOT NULL,
  data      TEXT   NOT NULL,
  PRIMARY KEY (id, sequence)
);
