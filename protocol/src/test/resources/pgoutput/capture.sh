#!/usr/bin/env bash
# Regenerates the pgoutput fixtures in this directory from a throwaway PostgreSQL 15.
#
# Usage:  bash capture.sh            (as root: the server runs as the "postgres" user)
# Env:    PG_BIN  (default /usr/lib/postgresql/15/bin)   WORK (default /tmp/weir-capture)
#         PORT    (default 55990)                         OUT  (default: this directory)
#
# The script creates a fresh cluster in $WORK, runs three workloads, each against its own
# logical replication slot, peeks the slot with pg_logical_slot_peek_binary_changes and
# writes one fixture file per peek: a header, then "LSN HEX" per pgoutput message.
# Every value written is synthetic. The cluster is stopped and removed at the end.
#
# Re-running it changes LSNs, XIDs, OIDs and timestamps; the tests assert on structure and
# on the row values below, never on those server-assigned numbers.
set -euo pipefail

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
WORK=${WORK:-/tmp/weir-capture}
PORT=${PORT:-55990}
OUT=${OUT:-$(cd "$(dirname "$0")" && pwd)}
DATA="$WORK/data"

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
psql_cap() {
  as_pg "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$WORK" -p "$PORT" -d postgres "$@"
}
stop_server() {
  as_pg "$PG_BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1 || true
}

rm -rf "$WORK"
mkdir -p "$WORK"
if [ "$(id -u)" = 0 ]; then chown postgres "$WORK"; fi
as_pg "$PG_BIN/initdb" -D "$DATA" -E UTF8 --locale=C.UTF-8 -U postgres >/dev/null
trap stop_server EXIT
as_pg "$PG_BIN/pg_ctl" -D "$DATA" -w -l "$WORK/server.log" start -o \
  "-c wal_level=logical -c port=$PORT -c unix_socket_directories=$WORK -c listen_addresses='' \
   -c max_prepared_transactions=10 -c max_replication_slots=10 -c fsync=off" >/dev/null
PG_VERSION=$(psql_cap -At -c 'SHOW server_version')

# peek FILE SLOT DESCRIPTION SESSION_SQL OPTIONS...
peek() {
  local file=$1 slot=$2 description=$3 session=$4
  shift 4
  local options="" sep=""
  while [ $# -gt 0 ]; do options+="$sep'$1', '$2'"; sep=", "; shift 2; done
  {
    echo "# pgoutput fixture: $description"
    echo "# Captured from PostgreSQL $PG_VERSION by capture.sh in this directory:"
    echo "#   session: $session"
    echo "#   SELECT lsn, encode(data, 'hex') FROM pg_logical_slot_peek_binary_changes('$slot', NULL, NULL, $options)"
    echo "# One pgoutput message per line: the LSN of the WAL record, a space, the message bytes in hex."
    psql_cap -At -F ' ' -c "$session" \
      -c "SELECT lsn, encode(data, 'hex') FROM pg_logical_slot_peek_binary_changes('$slot', NULL, NULL, $options)"
  } >"$OUT/$file"
}

# --- Workload 1: every message kind outside streaming and two-phase -----------------------
psql_cap <<'SQL'
CREATE TYPE weir_mood AS ENUM ('calm', 'busy');
CREATE TABLE weir_types (
  id        int4 PRIMARY KEY,
  c_int2    int2,
  c_int8    int8,
  c_numeric numeric,
  c_float4  float4,
  c_float8  float8,
  c_bool    bool,
  c_text    text,
  c_varchar varchar(16),
  c_bpchar  char(6),
  c_name    name,
  c_bytea   bytea,
  c_uuid    uuid,
  c_date    date,
  c_ts      timestamp,
  c_tstz    timestamptz,
  c_json    json,
  c_jsonb   jsonb,
  c_inet    inet,
  c_mood    weir_mood
);
CREATE TABLE weir_full (id int4, note text);
ALTER TABLE weir_full REPLICA IDENTITY FULL;
CREATE TABLE weir_toast (id int4 PRIMARY KEY, counter int4, big text);
ALTER TABLE weir_toast ALTER COLUMN big SET STORAGE EXTERNAL;
CREATE TABLE weir_parent (id serial PRIMARY KEY);
CREATE TABLE weir_child (id int4 PRIMARY KEY, parent_id int4 REFERENCES weir_parent (id));
CREATE TABLE weir_bulk (id int4 PRIMARY KEY, n int4);
CREATE PUBLICATION pub FOR ALL TABLES;
SELECT pg_replication_origin_create('weir_origin');
SELECT 'init' FROM pg_create_logical_replication_slot('cap_basic', 'pgoutput');
SQL

psql_cap <<'SQL'
SET TimeZone = 'UTC';
INSERT INTO weir_types VALUES
  (1, 12345, 9007199254740993, 12345.6789, 1.5, 3.141592653589793, true,
   'hello, weir', 'varchar value', 'ab', 'weir_name', '\xdeadbeef',
   'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '2024-01-02', '2024-01-02 03:04:05.123456',
   '2024-01-02 03:04:05.123456+00', '{"k": [1, 2]}', '{"k": [1, 2]}', '192.0.2.1', 'calm'),
  (2, -32768, -9223372036854775808, 'NaN', 'NaN', '-Infinity', false,
   '', 'üñí€😀', 'x', '', '\x',
   '00000000-0000-0000-0000-000000000000', 'infinity', '-infinity',
   'infinity', 'null', '[]', '2001:db8::1', 'busy'),
  (3, 32767, 9223372036854775807, 'Infinity', 'Infinity', 'Infinity', NULL,
   NULL, NULL, NULL, NULL, NULL,
   NULL, '0044-03-15 BC', '0044-03-15 12:00:00 BC',
   '1890-01-01 00:00:00+00', NULL, NULL, NULL, NULL),
  (4, 0, 0, '-Infinity', '-Infinity', '-0', NULL,
   NULL, NULL, NULL, NULL, NULL,
   NULL, '5874897-12-31', '294276-12-31 23:59:59.999999',
   '-infinity', NULL, NULL, NULL, NULL),
  (5, NULL, NULL, '-0.000000000000000000001', '1e-45', '2.2250738585072014e-308', NULL,
   NULL, NULL, NULL, NULL, NULL,
   NULL, '-infinity', 'infinity',
   '2024-06-30 23:59:59.5+00', NULL, NULL, NULL, NULL);
UPDATE weir_types SET c_text = 'updated' WHERE id = 1;
UPDATE weir_types SET id = 10 WHERE id = 1;
DELETE FROM weir_types WHERE id = 2;

INSERT INTO weir_full VALUES (1, 'first'), (2, 'second');
UPDATE weir_full SET note = 'changed' WHERE id = 1;
DELETE FROM weir_full WHERE id = 2;

INSERT INTO weir_toast
  SELECT 1, 0, string_agg(md5(g::text), '') FROM generate_series(1, 300) g;
UPDATE weir_toast SET counter = 1 WHERE id = 1;

SELECT pg_logical_emit_message(true, 'weir.test', 'transactional-content');
SELECT pg_logical_emit_message(false, 'weir.test', 'non-transactional-content');
SELECT pg_logical_emit_message(true, 'weir.bin', '\x00ff10'::bytea);

BEGIN;
INSERT INTO weir_full VALUES (99, 'rolled back');
ROLLBACK;

INSERT INTO weir_parent DEFAULT VALUES;
INSERT INTO weir_child VALUES (1, 1);
TRUNCATE weir_parent, weir_child RESTART IDENTITY CASCADE;
TRUNCATE weir_full;

SELECT pg_replication_origin_session_setup('weir_origin');
BEGIN;
SELECT pg_replication_origin_xact_setup('0/ABCDEF', '2024-01-02 03:04:05+00');
INSERT INTO weir_full VALUES (7, 'from origin');
COMMIT;
SELECT pg_replication_origin_session_reset();

ALTER TABLE weir_full ADD COLUMN extra int4;
INSERT INTO weir_full VALUES (8, 'after alter', 42);
SQL

peek basic-v1.txt cap_basic "protocol 1, text columns, TimeZone UTC" \
  "SET TimeZone = 'UTC'" proto_version 1 publication_names pub messages true
peek basic-v1-kolkata.txt cap_basic "protocol 1, text columns, TimeZone Asia/Kolkata" \
  "SET TimeZone = 'Asia/Kolkata'" proto_version 1 publication_names pub messages true
peek basic-v1-binary.txt cap_basic "protocol 1, binary columns" \
  "SET TimeZone = 'UTC'" proto_version 1 publication_names pub messages true binary true
psql_cap -c "SELECT pg_drop_replication_slot('cap_basic')" >/dev/null

# --- Workload 2: streamed transactions (protocol 2) ----------------------------------------
# Each big transaction exceeds logical_decoding_work_mem (64kB) of the peeking session, so
# pgoutput streams it in Stream Start/Stop blocks before its commit or abort is known.
psql_cap -c "SELECT 'init' FROM pg_create_logical_replication_slot('cap_stream', 'pgoutput')" >/dev/null
psql_cap <<'SQL'
BEGIN;
SELECT pg_logical_emit_message(true, 'weir.stream', 'in-stream-content');
INSERT INTO weir_bulk SELECT g, g FROM generate_series(1, 500) g;
UPDATE weir_bulk SET n = n + 1 WHERE id <= 3;
DELETE FROM weir_bulk WHERE id = 4;
COMMIT;

BEGIN;
INSERT INTO weir_bulk SELECT g, g FROM generate_series(1001, 1500) g;
SAVEPOINT s1;
INSERT INTO weir_bulk SELECT g, g FROM generate_series(2001, 2500) g;
ROLLBACK TO SAVEPOINT s1;
COMMIT;

BEGIN;
INSERT INTO weir_bulk SELECT g, g FROM generate_series(3001, 3500) g;
ROLLBACK;

INSERT INTO weir_bulk VALUES (9999, 1);

BEGIN;
INSERT INTO weir_bulk SELECT g, g FROM generate_series(4001, 4500) g;
TRUNCATE weir_bulk;
COMMIT;
SQL
peek stream-v2.txt cap_stream "protocol 2, streaming on, logical_decoding_work_mem 64kB" \
  "SET logical_decoding_work_mem = '64kB'" \
  proto_version 2 publication_names pub messages true streaming on
psql_cap -c "SELECT pg_drop_replication_slot('cap_stream')" >/dev/null

# --- Workload 3: two-phase commit (protocol 3) ---------------------------------------------
psql_cap -c "SELECT 'init' FROM pg_create_logical_replication_slot('cap_2pc', 'pgoutput', false, true)" >/dev/null
psql_cap <<'SQL'
BEGIN;
INSERT INTO weir_full VALUES (20, 'prepared then committed', 1);
PREPARE TRANSACTION 'weir-gid-commit';
COMMIT PREPARED 'weir-gid-commit';

BEGIN;
INSERT INTO weir_full VALUES (21, 'prepared then rolled back', 2);
PREPARE TRANSACTION 'weir-gid-rollback';
ROLLBACK PREPARED 'weir-gid-rollback';

BEGIN;
INSERT INTO weir_bulk SELECT g, g FROM generate_series(20001, 20500) g;
PREPARE TRANSACTION 'weir-gid-stream';
COMMIT PREPARED 'weir-gid-stream';
SQL
peek twophase-v3.txt cap_2pc "protocol 3, two_phase on, streaming on, logical_decoding_work_mem 64kB" \
  "SET logical_decoding_work_mem = '64kB'" \
  proto_version 3 publication_names pub messages true two_phase on streaming on
psql_cap -c "SELECT pg_drop_replication_slot('cap_2pc')" >/dev/null

stop_server
trap - EXIT
rm -rf "$WORK"
echo "fixtures written to $OUT"
