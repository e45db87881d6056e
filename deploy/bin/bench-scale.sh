#!/usr/bin/env bash
# The partition kernel at scale (issue 22): a source table of 10,000,000 rows of ~1 KB, on a
# PostgreSQL of its own, loaded through the CDC partition sink (an initial snapshot) into 64
# partitions of one node (-Xmx2g unless WEIR_BENCH_JAVA_OPTS says otherwise); prints the load rate,
# disk used, heap and snapshot bytes per document and the recovery of the largest partition.
# Figures, not assertions; see docs/benchmarks.md.
#   deploy/bin/bench-scale.sh                                  10,000,000 rows, 7-digit ids
#   deploy/bin/bench-scale.sh --documents 2000000 --ids uuid   36-character ids
#   deploy/bin/bench-scale.sh --help                           every option
# Needs about 40 GB of free disk for 10,000,000 rows. The source's PostgreSQL lives in
# .weir/pg-source (ports from 16432) and is stopped afterwards if this script started it.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
export WEIR_BENCH_JAVA_OPTS=${WEIR_BENCH_JAVA_OPTS:--Xmx2g}
source_env=(WEIR_PG_HOME="$repo/.weir/pg-source" WEIR_PG_PORT_BASE=16432)
source_running=yes
env "${source_env[@]}" deploy/bin/pg.sh status >/dev/null 2>&1 || source_running=no
source_lines=$(env "${source_env[@]}" deploy/bin/pg.sh start)
WEIR_SOURCE_PG_URL=$(printf '%s\n' "$source_lines" | sed -n "s/^export WEIR_PG_URL='\(.*\)'$/\1/p")
WEIR_SOURCE_PG_USER=$(printf '%s\n' "$source_lines" | sed -n "s/^export WEIR_PG_USER='\(.*\)'$/\1/p")
WEIR_SOURCE_PG_PASSWORD=$(printf '%s\n' "$source_lines" | sed -n "s/^export WEIR_PG_PASSWORD='\(.*\)'$/\1/p")
export WEIR_SOURCE_PG_URL WEIR_SOURCE_PG_USER WEIR_SOURCE_PG_PASSWORD
if [ "$source_running" = no ]; then
  trap 'env "${source_env[@]}" deploy/bin/pg.sh stop || true' EXIT
fi
weir_bench_run ScaleBenchmark "$@"
