#!/usr/bin/env bash
# Restore Weir's schema from an archive written by backup.sh. Every node must be stopped.
#
#   deploy/bin/restore.sh ARCHIVE --confirm DATABASE [--rewind-access]
#
# In one transaction: the live schema weir is renamed to weir_pre_restore_<UTC time> (kept, not
# deleted), the archive is restored as schema weir, and a marker (weir.restore_pending) is left for
# the first node that starts: before it serves anything it applies the restore fence (every token
# issued before the restore is refused with 409 token-invalidated, a new signing key signs, the
# cluster's restore epoch advances, every CDC pipeline halts restored-from-backup until it is
# dropped and started again). Principals, grants, collection policies and token keys are carried
# over from the replaced schema: a restore never brings back a revoked or rotated credential, a
# removed grant or a weaker policy. --rewind-access takes them from the archive instead.
#
# --confirm must name the database of WEIR_PG_URL. Connection: WEIR_PG_URL, WEIR_PG_USER,
# WEIR_PG_PASSWORD, as a node takes them. Installs nothing: says what is missing.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

usage() { sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }

archive="" confirm="" carry=1
while [ $# -gt 0 ]; do
  case "$1" in
    --confirm) [ $# -ge 2 ] || usage; confirm=$2; shift 2 ;;
    --confirm=*) confirm=${1#--confirm=}; shift ;;
    --rewind-access) carry=0; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "restore.sh: unknown option (see --help)" >&2; exit 2 ;;
    *) [ -z "$archive" ] || usage; archive=$1; shift ;;
  esac
done
[ -n "$archive" ] || usage
[ -r "$archive" ] || { echo "restore.sh: the archive is missing or not readable" >&2; exit 1; }

weir_pg_client_tools pg_restore psql
weir_pg_conninfo weir-restore
if [ "$confirm" != "$PG_DATABASE" ]; then
  echo "restore.sh: this replaces schema weir in database $PG_DATABASE; say so with --confirm $PG_DATABASE" >&2
  exit 2
fi
psql_q() { "$PG_CLIENT_BIN/psql" "$PG_CONNINFO" -XAtq -v ON_ERROR_STOP=1 "$@"; }
psql_q -c "SELECT 1" >/dev/null \
  || { echo "restore.sh: cannot connect to PostgreSQL at WEIR_PG_URL as $PGUSER (psql's message above)" >&2; exit 1; }

# Read whole first: grep -q stops at its match, and under pipefail a SIGPIPE'd writer fails the check.
listing=$("$PG_CLIENT_BIN/pg_restore" --list "$archive" 2>/dev/null) || listing=""
if ! grep -qE ' TABLE DATA weir cluster ' <<<"$listing"; then
  echo "restore.sh: $archive is not an archive of schema weir written by backup.sh (pg_restore --list finds no weir.cluster data)" >&2
  exit 1
fi

# Every node stopped: no session of Weir's pools (application_name weir) may be connected.
sessions=$(psql_q -c "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
  AND application_name = 'weir' AND pid <> pg_backend_pid()")
if [ "$sessions" != 0 ]; then
  echo "restore.sh: $sessions session(s) of Weir nodes are connected to $PG_DATABASE; stop every node first" >&2
  exit 1
fi

previous=""
if [ "$(psql_q -c "SELECT count(*) FROM pg_namespace WHERE nspname = 'weir'")" = 1 ]; then
  previous="weir_pre_restore_$(date -u +%Y%m%dt%H%M%Sz)"
  if [ "$(psql_q -c "SELECT count(*) FROM pg_namespace WHERE nspname = '$previous'")" != 0 ]; then
    echo "restore.sh: schema $previous exists already; wait a second and run again" >&2
    exit 1
  fi
fi
marker_previous=NULL
if [ -n "$previous" ] && [ "$carry" = 1 ]; then marker_previous="'$previous'"; fi

start=$(date +%s)
status=0
{
  echo "BEGIN;"
  echo "SET LOCAL lock_timeout = '10s';"
  if [ -n "$previous" ]; then echo "ALTER SCHEMA weir RENAME TO $previous;"; fi
  "$PG_CLIENT_BIN/pg_restore" --no-owner --no-acl --file=- "$archive"
  # An archive taken between a restore and its fence holds a marker already: this one replaces it.
  echo "DROP TABLE IF EXISTS weir.restore_pending;"
  echo "CREATE TABLE weir.restore_pending (previous_schema TEXT, requested_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp());"
  echo "INSERT INTO weir.restore_pending (previous_schema) VALUES ($marker_previous);"
  echo "COMMIT;"
} | "$PG_CLIENT_BIN/psql" "$PG_CONNINFO" -Xq -v ON_ERROR_STOP=1 >/dev/null || status=$?
if [ "$status" != 0 ]; then
  echo "restore.sh: the restore failed (psql's message above) and was rolled back: schema weir is as it was" >&2
  exit 1
fi

pipelines=$(psql_q -c "SELECT string_agg(pipeline, ', ' ORDER BY pipeline) FROM (SELECT pipeline FROM weir.cdc_slot
  $( [ -n "$previous" ] && [ "$carry" = 1 ] && echo "UNION SELECT pipeline FROM $previous.cdc_slot" )) p")
version=$(psql_q -c "SELECT max(version::int) FROM weir.flyway_schema_history WHERE success AND version IS NOT NULL")
echo "restore.sh: restored $archive into schema weir of $PG_DATABASE (migration V$version, $(( $(date +%s) - start ))s)" >&2
if [ -n "$previous" ]; then
  echo "restore.sh: the replaced schema is kept as $previous$( [ "$carry" = 1 ] && echo " (principals, grants, policies and token keys are carried over from it)"); drop it once the cluster runs: DROP SCHEMA $previous CASCADE" >&2
fi
echo "restore.sh: start the nodes: the first one applies the restore fence before it serves (tokens and cursors issued before the restore answer 409 token-invalidated)" >&2
if [ -n "$pipelines" ]; then
  echo "restore.sh: CDC pipelines that will halt restored-from-backup until dropped and started again: $pipelines" >&2
  echo "restore.sh:   for each: DELETE /admin/pipelines/<name>?confirm=<name>, then POST /admin/pipelines/<name>/start (see docs/operations.md, Backup and restore)" >&2
fi
