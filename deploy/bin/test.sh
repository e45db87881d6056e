#!/usr/bin/env bash
# Runs every Weir test: unit tests (*Test), integration tests against a real PostgreSQL (*IT), and
# the end-to-end tests in deploy/ that start real node processes (one of them drives the console in
# headless Chromium, installed here when missing). Provisions the private PostgreSQL with
# deploy/bin/pg.sh first. Extra arguments go to Maven, e.g.
#   deploy/bin/test.sh -Dit.test=ThreeNodeClusterIT -pl deploy -am
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
. deploy/bin/lib.sh
weir_require_build_tools
weir_require_browser

was_running=yes
deploy/bin/pg.sh status >/dev/null 2>&1 || was_running=no
eval "$(deploy/bin/pg.sh start)"
# Leave no server behind that this script started.
[ "$was_running" = no ] && trap 'deploy/bin/pg.sh stop || true' EXIT

export WEIR_TEST_PG_URL=$WEIR_PG_URL WEIR_TEST_PG_USER=$WEIR_PG_USER WEIR_TEST_PG_PASSWORD=$WEIR_PG_PASSWORD
mvn -B --no-transfer-progress -Dstyle.color=never verify "$@"
