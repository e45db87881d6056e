#!/usr/bin/env bash
# Cluster benchmark with real node processes (java -jar node/target/weir-node.jar node) on loopback:
#  1. failover: a 3-node cluster runs a CDC pipeline into the partitions while a writer commits small
#     transactions; 5 times the slot owner is SIGKILLed and the time until the pipeline streams again
#     on a survivor, and until a row committed after the kill is readable through the document API,
#     is measured; the killed node is restarted before the next run (--failover-fault freeze: SIGSTOP
#     instead, a hung host whose sessions stay open; SIGKILLed once measured);
#  2. document-API write throughput over HTTP, 1 node against 3 nodes side by side: 32 clients PUT
#     distinct 200-byte documents for 3 rounds of 20 s each: writes/s, latency p50/p99, the 3/1 ratio.
#  3. (only with --phases batch) batch writes on one node: 16 clients POST /v1/documents/batch with 100
#     documents each, against --clients single PUTs and against plain JDBC upserts of the same bodies into
#     a table of the same database, one row per commit: documents/s, latency, CPU per document.
#  4. (only with --phases restart) restart -> ready of one node: --restart-runs starts each of plain
#     java -jar and with a class-data archive, alternating: seconds and CPU seconds to /health/ready.
# Figures, not assertions: it exits 0 whatever they are. See docs/benchmarks.md.
#   deploy/bin/bench-cluster.sh                           defaults (about 10 minutes on 2 vCPUs, build included)
#   deploy/bin/bench-cluster.sh --phases failover --failover-runs 3 --stable-after 20s
#   deploy/bin/bench-cluster.sh --phases failover --failover-fault freeze
#   deploy/bin/bench-cluster.sh --phases batch --clients 64
#   deploy/bin/bench-cluster.sh --phases restart --restart-runs 6
#   deploy/bin/bench-cluster.sh --help                    every option
# Builds first (tests skipped), then uses the private PostgreSQL (deploy/bin/pg.sh), stopping it
# afterwards if this script started it. It creates and drops the databases weir_cbench and
# weir_cbench1 there. Node logs go to node/target/bench-cluster/.
# Extra JVM options of the benchmark program go in WEIR_BENCH_JAVA_OPTS, extra Maven arguments in WEIR_MVN_ARGS.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
weir_bench_run ClusterBenchmark "$@"
