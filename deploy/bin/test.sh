#!/usr/bin/env bash
# Runs every Weir test: unit tests (*Test), integration tests against a real PostgreSQL (*IT), and
# the end-to-end tests in deploy/ that start real node processes (one of them drives the console in
# headless Chromium, installed here when missing). Provisions the private PostgreSQL with
# deploy/bin/pg.sh first, checks the formatting (google-java-format) before anything is built, and
# prints the total wall time at the end.
#
#   deploy/bin/test.sh            everything (the README's test command; what CI runs)
#   deploy/bin/test.sh --quick    unit tests and module integration tests, no end-to-end node
#                                 processes (the deploy module's *IT classes are skipped)
#
# Extra arguments go to Maven, e.g.
#   deploy/bin/test.sh -Dit.test=ThreeNodeClusterIT -pl deploy -am
# The end-to-end classes run in WEIR_E2E_FORKS parallel JVMs (default 3; docs/testing.md).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
. deploy/bin/lib.sh
started=$SECONDS

quick=""
if [ "${1:-}" = "--quick" ]; then quick=yes; shift; fi

weir_require_build_tools
[ -n "$quick" ] || weir_require_browser

was_running=yes
deploy/bin/pg.sh status >/dev/null 2>&1 || was_running=no
eval "$(deploy/bin/pg.sh start)"

finish() {
  local rc=$?
  [ "$was_running" = no ] && { deploy/bin/pg.sh stop || true; }
  local t=$((SECONDS - started))
  printf 'weir: test.sh%s took %d min %02d s (exit status %d)\n' "${quick:+ --quick}" $((t / 60)) $((t % 60)) "$rc"
}
# Leave no server behind that this script started, and say how long it all took.
trap finish EXIT

# A run killed half way leaves its tests' replication slots behind, and each holds every WAL byte
# written since (12 GB after a few runs were seen). A server this script started has no test running
# against it, so every inactive test slot on it is stale.
if [ "$was_running" = no ]; then
  deploy/bin/pg.sh psql -tA -F ' ' \
    -c "SELECT database, slot_name FROM pg_replication_slots WHERE NOT active AND slot_name LIKE 'weir\_it\_%'" |
    while read -r db slot; do
      [ -n "$slot" ] || continue
      deploy/bin/pg.sh psql -q -tA -d "$db" -c "SELECT pg_drop_replication_slot('$slot')" >/dev/null &&
        echo "weir: dropped the stale test slot $slot (database $db)"
    done || true
  # A test JVM killed half way also leaves its own database behind (TestPostgres names them
  # <prefix>_<10 hex digits>), with whatever slots its test made (18 GB of WAL held by three were
  # seen): drop those slots and the database.
  deploy/bin/pg.sh psql -tA -c "SELECT datname FROM pg_database WHERE datname ~ '^[a-z_][a-z0-9_]*_[0-9a-f]{10}\$'" |
    while read -r db; do
      [ -n "$db" ] || continue
      deploy/bin/pg.sh psql -q -tA -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '$db' AND NOT active" >/dev/null &&
        deploy/bin/pg.sh psql -q -tA -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null &&
        echo "weir: dropped the leftover test database $db and its slots"
    done || true
fi

export WEIR_TEST_PG_URL=$WEIR_PG_URL WEIR_TEST_PG_USER=$WEIR_PG_USER WEIR_TEST_PG_PASSWORD=$WEIR_PG_PASSWORD
mvn -B --no-transfer-progress -Dstyle.color=never ${quick:+-Dweir.e2e.skip=true} \
  -Dweir.it.forks="${WEIR_IT_FORKS:-1}" -Dweir.persistence.it.forks="${WEIR_PERSISTENCE_IT_FORKS:-2}" \
  -Dweir.sharding.it.forks="${WEIR_SHARDING_IT_FORKS:-2}" \
  -Dweir.node.it.forks="${WEIR_NODE_IT_FORKS:-2}" -Dweir.unit.forks="${WEIR_UNIT_FORKS:-2}" \
  -Dweir.e2e.forks="${WEIR_E2E_FORKS:-3}" verify "$@"
