#!/usr/bin/env bash
# Partition benchmark: document writes through Cluster Sharding into 64 partitions (16 writers,
# throughput, latency percentiles, journal events per frame), heap per document of one partition
# holding 100,000 documents of 1 KB and its snapshot row size, and that partition's recovery time.
# Figures, not assertions: it exits 0 whatever they are. See docs/benchmarks.md.
#   deploy/bin/bench-partitions.sh                       defaults: 16 writers, 3 rounds of 20 s, 100,000 documents
#   deploy/bin/bench-partitions.sh --writers 32 --writes 50000 --phases writes
#   deploy/bin/bench-partitions.sh --help                every option
# Builds first (tests skipped), then uses the private PostgreSQL (deploy/bin/pg.sh), stopping it
# afterwards if this script started it. It creates and drops the database weir_pbench there.
# Extra JVM options go in WEIR_BENCH_JAVA_OPTS, extra Maven arguments in WEIR_MVN_ARGS.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
weir_bench_run PartitionBenchmark "$@"
