#!/usr/bin/env bash
# Changes-feed and live-query benchmark (the public read side, io.weir.node.feed.Feeds, in process):
#  1. 200,000 upserts of distinct 1 KB documents over 16 partitions, then the changes feed read from
#     the beginning to the end in pages of 1,000 positions by an administrator and by a principal
#     restricted by a collection policy (acl row rule, one sensitive field; half the rows visible),
#     side by side for 3 rounds: changes/s, page latency, medians and the ratio;
#  2. 1,000 live queries polling readLive while 1,000 writes/s are paced into their collection for
#     30 s: read latency p50/p99, reads/s, deltas, the achieved write rate and the delay from a
#     write's answer to the read that returned its delta.
#  3. (--phases isolation) writes paced at 500/s alone and beside feed readers paced at 20,000
#     changes/s, side by side: write p50/p99 and the ratio.
# Figures, not assertions: it exits 0 whatever they are. See docs/benchmarks.md.
#   deploy/bin/bench-feeds.sh                          defaults (about 3.5 minutes on 2 busy vCPUs, build included)
#   deploy/bin/bench-feeds.sh --phases live --live-queries 100
#   deploy/bin/bench-feeds.sh --help                   every option
# Builds first (tests skipped), then uses the private PostgreSQL (deploy/bin/pg.sh), stopping it
# afterwards if this script started it. It creates and drops the database weir_fbench there.
# Extra JVM options go in WEIR_BENCH_JAVA_OPTS, extra Maven arguments in WEIR_MVN_ARGS.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
weir_bench_run FeedBenchmark "$@"
