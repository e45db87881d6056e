#!/usr/bin/env bash
# Initial snapshot throughput benchmark: Weir's snapshot path (start-mode snapshot into a sink that
# discards rows) against COPY (SELECT ...) TO STDOUT of the same table read into a null stream, in
# the same rounds; prints rows/s, MB/s and the ratio Weir/COPY. Figures, not assertions.
#   deploy/bin/bench-snapshot.sh                          1,000,000 rows, 3 repeats
#   deploy/bin/bench-snapshot.sh --rows 200000 --repeats 5 --batch-rows 2000
# Builds first (tests skipped), then uses the private PostgreSQL (deploy/bin/pg.sh), stopping it
# afterwards if this script started it. It creates and drops the database weir_bench there.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
weir_bench_run SnapshotBenchmark "$@"
