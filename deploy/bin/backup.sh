#!/usr/bin/env bash
# Back up Weir's schema (weir: journal, snapshots, cluster identity, token keys, principals, grants,
# policies, CDC slot records and checkpoints) with pg_dump into one custom-format archive.
#
#   deploy/bin/backup.sh [--output FILE]
#
# Connection: WEIR_PG_URL, WEIR_PG_USER, WEIR_PG_PASSWORD, as a node takes them (for the private
# PostgreSQL: eval "$(deploy/bin/pg.sh env)"). Nodes may keep running: pg_dump reads one consistent
# snapshot. The archive holds the token-signing keys and principals' token hashes: keep it as
# secret as the administrator token (it is written with mode 600). Restore with restore.sh.
# Installs nothing: says what is missing. Prints the archive's path on standard output.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

usage() { sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }

output=""
while [ $# -gt 0 ]; do
  case "$1" in
    --output) [ $# -ge 2 ] || usage; output=$2; shift 2 ;;
    --output=*) output=${1#--output=}; shift ;;
    -h|--help) usage 0 ;;
    *) echo "backup.sh: unknown argument (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$output" ] || output="weir-backup-$(date -u +%Y%m%dT%H%M%SZ).dump"

weir_pg_client_tools pg_dump pg_restore psql
weir_pg_conninfo weir-backup
weir_pg_check_client_version

if [ "$("$PG_CLIENT_BIN/psql" "$PG_CONNINFO" -XAtqc "SELECT to_regclass('weir.cluster') IS NOT NULL")" != t ]; then
  echo "backup.sh: database $PG_DATABASE has no Weir schema (weir.cluster is missing); nothing to back up" >&2
  exit 1
fi
if [ "$("$PG_CLIENT_BIN/psql" "$PG_CONNINFO" -XAtqc "SELECT to_regclass('weir.restore_pending') IS NOT NULL")" = t ]; then
  echo "backup.sh: note: this schema was restored and no node has started on it since (its restore fence is pending);" \
    "the archive keeps that marker, so a restore of it is fenced too" >&2
fi
version=$("$PG_CLIENT_BIN/psql" "$PG_CONNINFO" -XAtqc \
  "SELECT max(version::int) FROM weir.flyway_schema_history WHERE success AND version IS NOT NULL")

umask 077
partial="$output.partial"
rm -f "$partial"
start=$(date +%s)
if ! "$PG_CLIENT_BIN/pg_dump" --dbname="$PG_CONNINFO" --schema=weir --format=custom --file="$partial"; then
  rm -f "$partial"
  echo "backup.sh: pg_dump failed (its message above); no archive written" >&2
  exit 1
fi
# The archive must hold the schema and its cluster identity, or it is no Weir backup.
# (The listing is read whole first: grep -q stops reading at its match, and under pipefail the
# listing's writer dying of SIGPIPE would fail the check.)
listing=$("$PG_CLIENT_BIN/pg_restore" --list "$partial") || listing=""
if ! grep -qE ' TABLE DATA weir cluster ' <<<"$listing"; then
  rm -f "$partial"
  echo "backup.sh: the archive holds no weir.cluster data; not kept" >&2
  exit 1
fi
mv "$partial" "$output"
bytes=$(wc -c < "$output")
echo "backup.sh: wrote $output ($bytes bytes, schema weir at migration V$version, PostgreSQL $PG_SERVER_MAJOR, $(( $(date +%s) - start ))s)" >&2
echo "$output"
