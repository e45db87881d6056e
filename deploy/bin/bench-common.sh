# Sourced by the benchmark scripts: builds the node (tests skipped; build output on stderr so that
# standard output carries only the figures), starts the private PostgreSQL (stopping it afterwards
# if it was not running) and runs one benchmark program: weir_bench_run <class in io.weir.bench> [args].
# The programs live in deploy/bench (weir-bench.jar, not part of the node); cluster benchmarks start
# node processes from node/target/weir-node.jar, built here too.
# Extra JVM options (heap, profiling) go in WEIR_BENCH_JAVA_OPTS; extra Maven arguments in
# WEIR_MVN_ARGS, e.g. WEIR_MVN_ARGS='-o -Dmaven.repo.local=/tmp/m2' (offline, a private local repository).
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
. deploy/bin/lib.sh

weir_bench_run() {
  local main=$1
  shift
  weir_require_build_tools
  echo "weir: building (mvn package, tests skipped)" >&2
  # shellcheck disable=SC2086 # WEIR_MVN_ARGS is a list of Maven arguments
  mvn -B -q --no-transfer-progress -Dstyle.color=never -Dspotless.check.skip=true ${WEIR_MVN_ARGS:-} -DskipTests package -pl deploy/bench -am >&2
  local was_running=yes
  deploy/bin/pg.sh status >/dev/null 2>&1 || was_running=no
  eval "$(deploy/bin/pg.sh start)"
  # Leave no server behind that this script started.
  [ "$was_running" = no ] && trap 'deploy/bin/pg.sh stop || true' EXIT
  # shellcheck disable=SC2086 # WEIR_BENCH_JAVA_OPTS is a list of JVM options
  java --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED \
    ${WEIR_BENCH_JAVA_OPTS:-} -cp deploy/bench/target/weir-bench.jar "io.weir.bench.$main" "$@"
}
