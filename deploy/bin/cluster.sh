#!/usr/bin/env bash
# A local 3-node Weir cluster on this machine, on loopback, against the private PostgreSQL
# (deploy/bin/pg.sh).
#
#   deploy/bin/cluster.sh start        build the jar if missing, start PostgreSQL and the nodes that
#                                      are not running, wait until every node is ready, show status
#   deploy/bin/cluster.sh status       each node's readiness, GET /admin/cluster and /admin/partitions
#   deploy/bin/cluster.sh stop         stop the nodes (SIGTERM: coordinated shutdown; SIGKILL after
#                                      WEIR_CLUSTER_STOP_TIMEOUT seconds). PostgreSQL keeps running:
#                                      stop it with deploy/bin/pg.sh stop
#   deploy/bin/cluster.sh logs N [-f]  the last lines of node N's log (1, 2 or 3); -f follows it
#
# Environment (all optional):
#   WEIR_CLUSTER_HTTP_BASE     HTTP port of node 1; node N uses base+N-1        (default 8081)
#   WEIR_CLUSTER_REMOTE_BASE   Pekko remoting port of node 1; node N base+N-1   (default 25521)
#                              Both below the ephemeral range (32768+). A fresh cluster whose ports
#                              are taken moves both bases up in steps of 10, and starts again on
#                              other ports when a node loses a bind race (at most 3 times).
#   WEIR_CLUSTER_JAVA_OPTS     JVM options of every node                       (default -Xmx384m)
#   WEIR_CLUSTER_CONFIG        a HOCON file passed to every node with --config
#   WEIR_CLUSTER_STOP_TIMEOUT  seconds stop waits after SIGTERM                 (default 45)
#   WEIR_CLUSTER_READY_TIMEOUT seconds start waits for /health/ready            (default 180)
#   WEIR_ADMIN_TOKEN           the administrator token; unset: a random one kept in
#                              .weir/cluster/admin-token (mode 600)
#   WEIR_PARTITIONS            partitions of a new cluster (fixed once created; default 64)
#   WEIR_MVN_ARGS              extra Maven arguments for the build (e.g. -o)
#
# State: .weir/cluster/ holds node-N.pid, node-N.log, node-N.ports and admin-token. Every command
# is idempotent: start leaves running nodes alone, stop and status with nothing running say so.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
. deploy/bin/lib.sh
state=$repo/.weir/cluster
mkdir -p "$state"
chmod 700 "$state" 2>/dev/null || true

NODES=3
http_base=${WEIR_CLUSTER_HTTP_BASE:-8081}
remote_base=${WEIR_CLUSTER_REMOTE_BASE:-25521}
jar=node/target/weir-node.jar

log() { printf 'cluster.sh: %s\n' "$*"; }
die() { printf 'cluster.sh: %s\n' "$*" >&2; exit 1; }

case "$http_base$remote_base" in *[!0-9]*) die "WEIR_CLUSTER_HTTP_BASE and WEIR_CLUSTER_REMOTE_BASE must be port numbers" ;; esac

# The ports node N was started with (kept so that status/stop still work if the environment changed).
node_http_port() {
  if [ -s "$state/node-$1.ports" ]; then cut -d' ' -f1 "$state/node-$1.ports"; else echo $((http_base + $1 - 1)); fi
}

# A pid file only counts if its process is alive and is a Weir node (a reused pid is not ours).
node_pid() {
  local f="$state/node-$1.pid" pid
  [ -s "$f" ] || return 1
  pid=$(cat "$f")
  kill -0 "$pid" 2>/dev/null || return 1
  if [ -r "/proc/$pid/cmdline" ]; then tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q 'weir-node.jar' || return 1; fi
  echo "$pid"
}

admin_token() {
  if [ -n "${WEIR_ADMIN_TOKEN:-}" ]; then echo "$WEIR_ADMIN_TOKEN"; return; fi
  if [ ! -s "$state/admin-token" ]; then
    (umask 077; head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' > "$state/admin-token")
  fi
  cat "$state/admin-token"
}

require_curl() {
  command -v curl >/dev/null 2>&1 && return 0
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >&2
  else
    die "curl is missing; install with: sudo apt-get install curl"
  fi
}

ready() { curl -sf -m 3 "http://127.0.0.1:$1/health/ready" >/dev/null 2>&1; }

pretty() {
  if command -v python3 >/dev/null 2>&1; then python3 -m json.tool 2>/dev/null || cat; else cat; fi
}

# Members of GET /admin/cluster as one line each; the raw body without python3.
cluster_summary() {
  local body=$1
  if command -v python3 >/dev/null 2>&1; then
    printf '%s' "$body" | python3 -c '
import json, sys
try:
    c = json.load(sys.stdin)
except Exception:
    print("  (not JSON)"); sys.exit(0)
if "members" not in c:
    print("  " + json.dumps(c)); sys.exit(0)
print("  cluster id: %s" % c.get("clusterId"))
print("  leader:     %s" % c.get("leader"))
for m in c.get("members", []):
    print("  member %-40s %-8s reachable=%s roles=%s" % (m.get("address"), m.get("status"), m.get("reachable"), ",".join(m.get("roles", []))))
print("  unreachable: %s" % (c.get("unreachable") or "none"))
'
  else
    echo "  $body"
  fi
}

show_status() {
  local token n port pid any="" ready_port=""
  token=$(admin_token)
  for n in $(seq 1 $NODES); do
    port=$(node_http_port "$n")
    if pid=$(node_pid "$n"); then
      any=1
      local r; r=$(curl -s -m 3 "http://127.0.0.1:$port/health/ready" 2>/dev/null || true)
      echo "node $n: pid $pid, http 127.0.0.1:$port, ready: ${r:-no answer}"
      ready "$port" && [ -z "$ready_port" ] && ready_port=$port
    else
      echo "node $n: not running"
    fi
  done
  if [ -z "$any" ]; then
    echo "cluster.sh: no node running (start them with deploy/bin/cluster.sh start)"
    return 3
  fi
  if [ -z "$ready_port" ]; then
    echo "cluster.sh: no node is ready yet"
    return 1
  fi
  echo "cluster (GET /admin/cluster on node at port $ready_port):"
  cluster_summary "$(curl -s -m 5 -H "Authorization: Bearer $token" "http://127.0.0.1:$ready_port/admin/cluster")"
  echo "partitions (GET /admin/partitions):"
  curl -s -m 10 -H "Authorization: Bearer $token" "http://127.0.0.1:$ready_port/admin/partitions" | pretty | sed 's/^/  /'
  echo
}

stop_nodes() {
  local timeout=${WEIR_CLUSTER_STOP_TIMEOUT:-45} n pid pids=()
  for n in $(seq 1 $NODES); do
    if pid=$(node_pid "$n"); then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$n:$pid")
    fi
  done
  if [ ${#pids[@]} -eq 0 ]; then
    log "no node running"
  else
    log "SIGTERM sent to ${#pids[@]} node(s); waiting up to ${timeout}s for coordinated shutdown"
    local deadline=$((SECONDS + timeout))
    for entry in "${pids[@]}"; do
      n=${entry%%:*}; pid=${entry#*:}
      while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
      if kill -0 "$pid" 2>/dev/null; then
        log "node $n (pid $pid) still running after ${timeout}s: SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
      else
        log "node $n (pid $pid) stopped"
      fi
    done
  fi
  for n in $(seq 1 $NODES); do node_pid "$n" >/dev/null || rm -f "$state/node-$n.pid"; done
  log "PostgreSQL was left running (deploy/bin/pg.sh status; stop it with deploy/bin/pg.sh stop)"
}

build_if_missing() {
  if [ -f "$jar" ] && [ -d node/target/lib ]; then return 0; fi
  weir_require_build_tools
  log "building the node jar (mvn package, tests skipped)"
  # shellcheck disable=SC2086
  mvn -B -q --no-transfer-progress -Dstyle.color=never -Dspotless.check.skip=true -DskipTests ${WEIR_MVN_ARGS:-} package -pl node -am 2>&1 \
    | sed "s/\x1b\[[0-9;]*m//g"
  [ -f "$jar" ] || die "the build did not produce $jar"
}

# True when one of node 1..N's HTTP or remoting ports (from the current bases) is listened on.
base_ports_taken() {
  local n
  for n in $(seq 1 $NODES); do
    weir_port_in_use $((http_base + n - 1)) && return 0
    weir_port_in_use $((remote_base + n - 1)) && return 0
  done
  return 1
}

# Stops the nodes named in $@ (this start's own, after a lost bind race) with SIGKILL.
kill_started() {
  local n pid
  for n in "$@"; do
    if pid=$(node_pid "$n"); then kill -KILL "$pid" 2>/dev/null || true; fi
    rm -f "$state/node-$n.pid" "$state/node-$n.ports"
  done
}

start_nodes() {
  require_curl
  build_if_missing
  command -v java >/dev/null 2>&1 || weir_require_build_tools
  eval "$(deploy/bin/pg.sh start)"
  local token n http remote pid fresh=yes attempt=1
  # Nodes still running keep their ports: a restarted node must use the same seed list as they do.
  for n in $(seq 1 $NODES); do
    if node_pid "$n" >/dev/null && [ -s "$state/node-$n.ports" ]; then
      read -r http remote < "$state/node-$n.ports"
      http_base=$((http - n + 1)); remote_base=$((remote - n + 1))
      fresh=""
      break
    fi
  done
  # A fresh cluster moves past ports other programs listen on (in steps of 10, at most 20 steps).
  if [ -n "$fresh" ]; then
    local shifts=0
    while base_ports_taken; do
      shifts=$((shifts + 1))
      [ "$shifts" -le 20 ] || die "no free ports found from HTTP ${WEIR_CLUSTER_HTTP_BASE:-8081} / remoting ${WEIR_CLUSTER_REMOTE_BASE:-25521} on; set WEIR_CLUSTER_HTTP_BASE and WEIR_CLUSTER_REMOTE_BASE"
      http_base=$((http_base + 10)); remote_base=$((remote_base + 10))
    done
    [ "$shifts" -eq 0 ] || log "ports in use: starting at HTTP $http_base, remoting $remote_base instead"
  fi
  token=$(admin_token)
  local config_args=()
  if [ -n "${WEIR_CLUSTER_CONFIG:-}" ]; then
    [ -r "$WEIR_CLUSTER_CONFIG" ] || die "WEIR_CLUSTER_CONFIG=$WEIR_CLUSTER_CONFIG is not readable"
    config_args=(--config "$WEIR_CLUSTER_CONFIG")
  fi
  while :; do
    local seeds="" started=()
    for n in $(seq 1 $NODES); do
      seeds="${seeds:+$seeds,}127.0.0.1:$((remote_base + n - 1))"
    done
    for n in $(seq 1 $NODES); do
      http=$((http_base + n - 1)); remote=$((remote_base + n - 1))
      if pid=$(node_pid "$n"); then
        log "node $n already running (pid $pid, http $(node_http_port "$n"))"
        continue
      fi
      weir_port_in_use "$http" && die "port $http (HTTP of node $n) is in use by another process; set WEIR_CLUSTER_HTTP_BASE"
      weir_port_in_use "$remote" && die "port $remote (remoting of node $n) is in use by another process; set WEIR_CLUSTER_REMOTE_BASE"
      echo "$http $remote" > "$state/node-$n.ports"
      # shellcheck disable=SC2086
      WEIR_ADMIN_TOKEN=$token WEIR_HTTP_HOST=127.0.0.1 WEIR_HTTP_PORT=$http \
        WEIR_CLUSTER_HOST=127.0.0.1 WEIR_CLUSTER_PORT=$remote WEIR_SEED_NODES=$seeds \
        WEIR_MARKS_DIR="${WEIR_MARKS_DIR:-$state/node-$n-ddata}" \
        nohup java ${WEIR_CLUSTER_JAVA_OPTS:--Xmx384m} -jar "$jar" node "${config_args[@]}" \
        > "$state/node-$n.log" 2>&1 < /dev/null &
      echo $! > "$state/node-$n.pid"
      started+=("$n")
      log "node $n started (pid $!, http 127.0.0.1:$http, remoting 127.0.0.1:$remote, log .weir/cluster/node-$n.log)"
    done

    local timeout=${WEIR_CLUSTER_READY_TIMEOUT:-180} deadline all lost=""
    deadline=$((SECONDS + timeout))
    printf 'cluster.sh: waiting for /health/ready on every node '
    while :; do
      all=1
      for n in $(seq 1 $NODES); do
        if ! node_pid "$n" >/dev/null; then
          echo
          # A port taken between the check and the node's bind: a fresh cluster starts again on
          # other ports (at most 3 times); anything else ends here with the node's log.
          if [ -n "$fresh" ] && [ "$attempt" -lt 3 ] \
              && grep -q -e 'Address already in use' -e 'BindException' "$state/node-$n.log" 2>/dev/null; then
            lost=$n
            break 2
          fi
          printf 'cluster.sh: node %s exited during start-up; last log lines:\n' "$n" >&2
          tail -n 30 "$state/node-$n.log" >&2 || true
          exit 1
        fi
        ready "$(node_http_port "$n")" || all=""
      done
      [ -n "$all" ] && break 2
      if [ $SECONDS -ge $deadline ]; then
        echo
        die "not every node was ready after ${timeout}s; see deploy/bin/cluster.sh status and .weir/cluster/node-N.log"
      fi
      printf '.'; sleep 2
    done
    log "node $lost lost a port to another process before binding it; starting the cluster again on other ports"
    kill_started "${started[@]}"
    attempt=$((attempt + 1))
    http_base=$((http_base + 10)); remote_base=$((remote_base + 10))
    while base_ports_taken; do http_base=$((http_base + 10)); remote_base=$((remote_base + 10)); done
  done
  echo
  log "all $NODES nodes ready"
  cat <<TXT
  HTTP API:    http://127.0.0.1:$(node_http_port 1) .. http://127.0.0.1:$(node_http_port $NODES)
  seed nodes:  $seeds
  PostgreSQL:  $WEIR_PG_URL  (deploy/bin/pg.sh psql opens a shell)
  admin token: $( [ -n "${WEIR_ADMIN_TOKEN:-}" ] && echo 'from WEIR_ADMIN_TOKEN' || echo '.weir/cluster/admin-token' )
  stop:        deploy/bin/cluster.sh stop   (PostgreSQL keeps running: deploy/bin/pg.sh stop)
TXT
  show_status
}

case "${1:-}" in
  start) start_nodes ;;
  stop) stop_nodes ;;
  status) require_curl; show_status ;;
  logs)
    n=${2:-}
    case "$n" in 1|2|3) ;; *) die "usage: deploy/bin/cluster.sh logs N [-f]   (N = 1, 2 or 3)" ;; esac
    [ -f "$state/node-$n.log" ] || die "no log for node $n yet ($state/node-$n.log)"
    if [ "${3:-}" = "-f" ]; then exec tail -n "${WEIR_LOG_LINES:-100}" -f "$state/node-$n.log"; fi
    tail -n "${WEIR_LOG_LINES:-100}" "$state/node-$n.log" ;;
  *) echo "usage: deploy/bin/cluster.sh start|stop|status|logs N [-f]" >&2; exit 2 ;;
esac
