#!/usr/bin/env bash
# Runs Weir's benchmark programs and prints their figures (see docs/benchmarks.md):
#   deploy/bin/bench.sh                 all of them with their defaults, one after the other
#   deploy/bin/bench.sh cdc [opts]      CDC throughput against pg_recvlogical (bench-cdc.sh)
#   deploy/bin/bench.sh snapshot [opts] initial snapshot throughput against COPY (bench-snapshot.sh)
#   deploy/bin/bench.sh partitions [opts] document writes, heap and recovery of partitions (bench-partitions.sh)
#   deploy/bin/bench.sh projections [opts] projection consumers' read+commit loop during writes (bench-projections.sh)
#   deploy/bin/bench.sh feeds [opts]    changes-feed reads and live queries during writes (bench-feeds.sh)
#   deploy/bin/bench.sh cluster [opts]  failover time and document writes, 1 node against 3 (bench-cluster.sh)
#   deploy/bin/bench.sh continuous [opts] continuous top-N: scoped deltas against full reads (bench-continuous.sh)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
case "${1:-all}" in
  cdc) shift; exec "$here/bench-cdc.sh" "$@" ;;
  snapshot) shift; exec "$here/bench-snapshot.sh" "$@" ;;
  partitions) shift; exec "$here/bench-partitions.sh" "$@" ;;
  projections) shift; exec "$here/bench-projections.sh" "$@" ;;
  feeds) shift; exec "$here/bench-feeds.sh" "$@" ;;
  cluster) shift; exec "$here/bench-cluster.sh" "$@" ;;
  continuous) shift; exec "$here/bench-continuous.sh" "$@" ;;
  all) "$here/bench-cdc.sh"; echo; "$here/bench-snapshot.sh"; echo; "$here/bench-partitions.sh"; echo; "$here/bench-projections.sh"; echo; "$here/bench-feeds.sh"; echo; "$here/bench-cluster.sh"; echo; "$here/bench-continuous.sh" ;;
  -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' ;;
  *) echo "bench: unknown benchmark '$1' (cdc, snapshot, partitions, projections, feeds, cluster, continuous or all)" >&2; exit 2 ;;
esac
