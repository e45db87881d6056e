#!/usr/bin/env bash
# Continuous top-N benchmark (io.weir.node.continuous, one node in process): a table of 1,000,000
# rows, the same top-100 query registered twice on one scope, maintained incrementally (scoped
# deltas with their fallbacks) and by re-running the full query on every transaction, side by side;
# 400 single-row score updates on 1% hot keys, one transaction at a time. Prints rows read from
# PostgreSQL and the maintenance time per transaction (p50/p99) for both, the fallback rate and the
# ratios, and one EXPLAIN ANALYZE of each kind of read. Figures, not assertions: it exits 0 whatever
# they are. See docs/benchmarks.md.
#   deploy/bin/bench-continuous.sh                       defaults (a few minutes, build included)
#   deploy/bin/bench-continuous.sh --score-index         with an index on score (the full query reads the top by index)
#   deploy/bin/bench-continuous.sh --help                every option
# Builds first (tests skipped), then uses the private PostgreSQL (deploy/bin/pg.sh), stopping it
# afterwards if this script started it. It creates and drops the database weir_cbench and the role
# weir_cbench_reader there. Extra JVM options go in WEIR_BENCH_JAVA_OPTS, extra Maven arguments in WEIR_MVN_ARGS.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
weir_bench_run ContinuousBenchmark "$@"
