#!/usr/bin/env bash
# Upgrading partitions whose snapshots hold every body (the format before ADR 0032): stores 64
# snapshots of ~150 MB in the old format, starts a node process (-Xmx2g) that moves their documents
# into the documents table, SIGKILLs it halfway and starts it again; prints the time, the rate, the
# node's peak heap, and checks every document arrived once. See docs/benchmarks.md.
#   deploy/bin/bench-upgrade.sh                                   64 x 150,000 documents of ~1 KB
#   deploy/bin/bench-upgrade.sh --partitions 8 --documents 20000  a quick run
#   deploy/bin/bench-upgrade.sh --help                            every option
# Needs about 25 GB of free disk at the defaults. Creates and drops the database weir_upgrade.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
weir_bench_run UpgradeBenchmark "$@"
