-- Journal payloads, snapshots and document bodies large enough to be TOASTed (about 2 kB) are
-- compressed with LZ4 instead of PostgreSQL's default pglz (ADR 0038): on this project's
-- benchmarks LZ4 halved PostgreSQL's time to insert a journal of 2 kB events and cut a partition's
-- replay of them by a quarter, for about the same size. Only values written from now on use it;
-- older ones stay pglz and read as before. A server built without LZ4 keeps pglz: the change is
-- skipped with a notice, nothing else depends on it.
DO $$
BEGIN
  ALTER TABLE event_journal ALTER COLUMN event_payload SET COMPRESSION lz4;
  ALTER TABLE snapshot ALTER COLUMN snapshot_payload SET COMPRESSION lz4;
  ALTER TABLE documents ALTER COLUMN body SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
  RAISE NOTICE 'this PostgreSQL server has no LZ4 support: large values stay pglz-compressed';
END
$$;
