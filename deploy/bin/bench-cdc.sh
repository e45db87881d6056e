#!/usr/bin/env bash
# CDC throughput benchmark: the same WAL drained by PostgreSQL's pg_recvlogical and by Weir's slot
# stage (CdcPipeline into a no-op sink); prints rows/s for each and the ratio Weir/pg_recvlogical.
# Figures, not assertions: it exits 0 whatever the ratio. See docs/benchmarks.md.
#   deploy/bin/bench-cdc.sh                        200,000 row changes, 100- and 10,000-row transactions, 3 repeats
#   deploy/bin/bench-cdc.sh --rows 500000 --repeats 5 --txn-sizes 1,100,10000
#   deploy/bin/bench-cdc.sh --help                 every option
# Builds first (tests skipped), then uses the private PostgreSQL (deploy/bin/pg.sh), stopping it
# afterwards if this script started it. It creates and drops the database weir_bench there.
# Extra JVM options (heap, profiling) go in WEIR_BENCH_JAVA_OPTS, e.g.
#   WEIR_BENCH_JAVA_OPTS='-XX:StartFlightRecording=filename=.weir/bench.jfr,settings=profile' deploy/bin/bench-cdc.sh
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
weir_bench_run CdcBenchmark "$@"
