#!/usr/bin/env bash
# Initial snapshot throughput benchmark: Weir's snapshot path (start-mode snapshot into a sink that
# discards rows) against COPY (SELECT ...) TO STDOUT of the same table read into a null stream, in
# the same rounds; prints rows/s, MB/s and the ratio Weir/COPY. Figures, not assertions.
#   deploy/bin/bench-snapshot.sh                          1,000,000 rows, 3 repeats
#   deploy/bin/bench-snapshot.sh --rows 200000 --repeats 5 --batch-rows 2000
# Builds first (tests skipped), then uses the private PostgreSQL (deploy/bin/pg.sh), stopping it
# afterwards if this script started it. It creates and drops the database weir_bench there.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
. deploy/bin/lib.sh
weir_require_build_tools

echo "weir: building (mvn package, tests skipped)" >&2
mvn -B -q --no-transfer-progress -Dstyle.color=never -DskipTests package -pl node -am >&2

was_running=yes
deploy/bin/pg.sh status >/dev/null 2>&1 || was_running=no
eval "$(deploy/bin/pg.sh start)"
[ "$was_running" = no ] && trap 'deploy/bin/pg.sh stop || true' EXIT

# shellcheck disable=SC2086 # WEIR_BENCH_JAVA_OPTS is a list of JVM options
java ${WEIR_BENCH_JAVA_OPTS:-} -cp node/target/weir-node.jar io.weir.node.bench.SnapshotBenchmark "$@"
