-- Receipts of keyed API writes (docs/partitions.md, Document API; ADR 0034): what a retry of the
-- same request is answered, kept for weir.partitions.receipts.ttl (24 h). Written by the partition
-- with its documents, from its own journal events; the heap keeps only the latest ones.
-- receipt_key is the caller's key hashed with its principal; command_id adds the request's hash.
CREATE TABLE receipts (
  partition_id   INTEGER  NOT NULL,
  receipt_key    TEXT COLLATE "C" NOT NULL,
  command_id     TEXT     NOT NULL,
  first_sequence BIGINT   NOT NULL,
  revisions      BIGINT[] NOT NULL,
  at_millis      BIGINT   NOT NULL,
  journal_seq    BIGINT   NOT NULL,
  PRIMARY KEY (partition_id, receipt_key)
);

CREATE INDEX receipts_age ON receipts (partition_id, at_millis);
