-- Partitions keep an index in their heap and read documents from weir.documents (ADR 0032).

-- The partition's next outbox sequence as of applied_through: a read of many documents at the
-- table's position knows where the outbox stood then (0: not known yet; set when the partition next
-- starts).
ALTER TABLE document_positions ADD COLUMN outbox_next BIGINT NOT NULL DEFAULT 0;

-- Moving the documents of a snapshot written before ADR 0032 (bodies in the snapshot) into
-- weir.documents: how far a partition got, so that a move interrupted by a crash resumes.
CREATE TABLE snapshot_upgrades (
  partition_id    INTEGER PRIMARY KEY,
  snapshot_seq    BIGINT  NOT NULL,
  documents_done  BIGINT  NOT NULL,
  documents_total BIGINT  NOT NULL
);
