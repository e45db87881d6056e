#!/usr/bin/env bash
# Projection benchmark: the read+commit loop of 4 projection consumers on one partition while 4
# writers keep writing 1 KB documents into it. The consumers start 40,000 outbox entries behind;
# while they are behind it reports consumer entries/s, batches/s, read and commit latency and the
# concurrent writes/s (then the rest of the run, caught up). The outbox is purged through the
# lowest consumer checkpoint as it goes. Figures, not assertions: it exits 0 whatever they are.
# See docs/benchmarks.md.
#   deploy/bin/bench-projections.sh                      defaults: 4 consumers, 4 writers, 5 s warm-up, up to 20 s measured
#   deploy/bin/bench-projections.sh --writers 0          the consumers alone, draining the backlog
#   deploy/bin/bench-projections.sh --help               every option
# Builds first (tests skipped), then uses the private PostgreSQL (deploy/bin/pg.sh), stopping it
# afterwards if this script started it. It creates and drops the database weir_prbench there.
# Extra JVM options go in WEIR_BENCH_JAVA_OPTS, extra Maven arguments in WEIR_MVN_ARGS.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
weir_bench_run ProjectionBenchmark "$@"
