-- The partitions' documents (docs/partitions.md, "The documents table"; ADR 0029): one row per
-- partition, collection and id, written only by the partition itself from its persisted journal
-- events. The body is the exact text of the after image (text, not jsonb: key order, numbers and
-- escapes stay byte-identical); ids and collections compare by code point as paging does. A
-- deleted document stays as a tombstone (body NULL) with the row-visibility value its deletion is
-- shown by. journal_seq is the journal sequence of the document's last change.
CREATE TABLE documents (
  partition_id INTEGER NOT NULL,
  collection   TEXT COLLATE "C" NOT NULL,
  id           TEXT COLLATE "C" NOT NULL,
  revision     BIGINT  NOT NULL,
  body         TEXT,
  acl          TEXT,
  deleted      BOOLEAN NOT NULL,
  journal_seq  BIGINT  NOT NULL,
  PRIMARY KEY (partition_id, collection, id)
);

-- Per partition: its journal events are applied to documents through applied_through (they change
-- together, in one transaction that locks this row first), and the row rules' fields as of that
-- event (JSON object, collection to field). The journal is pruned only up to applied_through.
CREATE TABLE document_positions (
  partition_id    INTEGER PRIMARY KEY,
  applied_through BIGINT  NOT NULL CHECK (applied_through >= 0),
  rule_fields     TEXT    NOT NULL
);
