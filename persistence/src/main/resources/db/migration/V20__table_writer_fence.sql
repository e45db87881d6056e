-- One writer per partition's rows in weir.documents (ADR 0060): a partition's table writer claims
-- its position row when it starts by raising writer_epoch, and every apply it makes checks, under
-- the row's lock, that the epoch is still its own. A writer of an older incarnation of the
-- partition (a storage that changed under it, a handoff) is refused instead of applying.
ALTER TABLE document_positions ADD COLUMN writer_epoch BIGINT NOT NULL DEFAULT 0;
