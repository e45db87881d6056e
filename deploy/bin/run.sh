#!/usr/bin/env bash
# Builds Weir, provisions the private PostgreSQL, starts one node in the background with a demo
# CDC pipeline (public.demo_orders -> demo_mirror.demo_orders), writes some changes to the demo
# table and shows them streamed, with the node's HTTP address and cluster status.
#   deploy/bin/run.sh          build, start (restarting a node this script started before)
#   deploy/bin/run.sh stop     stop the node and the private PostgreSQL
#   deploy/bin/run.sh status   the node's readiness and cluster status
# The node's log is .weir/node.log; the admin token is WEIR_ADMIN_TOKEN or, when unset, a random
# one kept in .weir/admin-token (mode 600).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
. deploy/bin/lib.sh
state=$repo/.weir
mkdir -p "$state"

node_running() { [ -f "$state/node.pid" ] && kill -0 "$(cat "$state/node.pid")" 2>/dev/null; }

stop_node() {
  if node_running; then
    local pid; pid=$(cat "$state/node.pid")
    kill -TERM "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"
    echo "weir: node stopped"
  fi
  rm -f "$state/node.pid"
}

admin_token() {
  if [ -n "${WEIR_ADMIN_TOKEN:-}" ]; then echo "$WEIR_ADMIN_TOKEN"; return; fi
  if [ ! -s "$state/admin-token" ]; then
    (umask 077; head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' > "$state/admin-token")
  fi
  cat "$state/admin-token"
}

show_status() {
  local port; port=$(cat "$state/node.http-port")
  local token; token=$(admin_token)
  echo "weir: readiness:"
  curl -s "http://127.0.0.1:$port/health/ready"; echo
  echo "weir: cluster status (GET /admin/cluster):"
  local body; body=$(curl -s -H "Authorization: Bearer $token" "http://127.0.0.1:$port/admin/cluster")
  if command -v python3 >/dev/null 2>&1; then printf '%s' "$body" | python3 -m json.tool; else echo "$body"; fi
}

case "${1:-start}" in
  stop)
    stop_node
    deploy/bin/pg.sh stop
    exit 0 ;;
  status)
    node_running || { echo "weir: no node running (start one with deploy/bin/run.sh)"; exit 3; }
    show_status
    exit 0 ;;
  start) ;;
  *) echo "usage: deploy/bin/run.sh [start|stop|status]" >&2; exit 2 ;;
esac

weir_require_build_tools
command -v curl >/dev/null 2>&1 || {
  if [ "$(id -u)" -eq 0 ]; then DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt-get install -y -qq curl >&2
  else echo "weir: curl is missing; install with: sudo apt-get install curl" >&2; exit 1; fi
}

echo "weir: building (mvn package, tests skipped; deploy/bin/test.sh runs them)"
mvn -B -q --no-transfer-progress -Dstyle.color=never -DskipTests package -pl node -am 2>&1 | sed "s/\x1b\[[0-9;]*m//g"

eval "$(deploy/bin/pg.sh start)"
stop_node

# The demo: a source table, its publication, and a mirror table the pipeline keeps equal to it.
deploy/bin/pg.sh psql -q -v ON_ERROR_STOP=1 <<'SQL'
SET client_min_messages = warning;
CREATE TABLE IF NOT EXISTS public.demo_orders (
  id int PRIMARY KEY, customer text NOT NULL, amount numeric(10,2), status text NOT NULL);
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'weir_demo') THEN
    CREATE PUBLICATION weir_demo FOR TABLE public.demo_orders;
  END IF;
END $$;
CREATE SCHEMA IF NOT EXISTS demo_mirror;
CREATE TABLE IF NOT EXISTS demo_mirror.demo_orders (
  id int PRIMARY KEY, customer text NOT NULL, amount numeric(10,2), status text NOT NULL);
SQL
cat > "$state/node.conf" <<'CONF'
# Written by deploy/bin/run.sh: the demo pipeline.
weir.pipelines.demo {
  slot = weir_demo
  publications = [weir_demo]
  sink { target-schema = demo_mirror, applied-log = true }
}
CONF

http_port=${WEIR_HTTP_PORT:-$(weir_free_port 8080)}
cluster_port=${WEIR_CLUSTER_PORT:-$(weir_free_port 25520)}
echo "$http_port" > "$state/node.http-port"
WEIR_ADMIN_TOKEN=$(admin_token) WEIR_HTTP_PORT=$http_port WEIR_CLUSTER_PORT=$cluster_port \
  nohup java -Xmx512m -jar node/target/weir-node.jar node --config "$state/node.conf" > "$state/node.log" 2>&1 < /dev/null &
echo $! > "$state/node.pid"

printf 'weir: starting node (pid %s, log .weir/node.log) ' "$(cat "$state/node.pid")"
for _ in $(seq 1 120); do
  if ! node_running; then
    echo; echo "weir: the node exited during start-up; last log lines:" >&2
    tail -n 30 "$state/node.log" >&2
    exit 1
  fi
  if curl -sf "http://127.0.0.1:$http_port/health/ready" >/dev/null 2>&1; then break; fi
  printf '.'; sleep 1
done
echo
curl -sf "http://127.0.0.1:$http_port/health/ready" >/dev/null || { echo "weir: node not ready after 120 s; see .weir/node.log" >&2; exit 1; }

token=$(admin_token)
for _ in $(seq 1 60); do
  curl -s -H "Authorization: Bearer $token" "http://127.0.0.1:$http_port/admin/pipelines/demo" | grep -q '"state":"running"' && break
  sleep 1
done

echo "weir: writing demo changes to public.demo_orders (insert, update, delete in three transactions)"
next=$(deploy/bin/pg.sh psql -tA -c "SELECT coalesce(max(id), 0) + 1 FROM public.demo_orders")
deploy/bin/pg.sh psql -q -v ON_ERROR_STOP=1 <<SQL
BEGIN;
INSERT INTO public.demo_orders VALUES ($next, 'ada', 42.50, 'new'), ($((next + 1)), 'grace', 7.25, 'new'), ($((next + 2)), 'linus', 99.00, 'new');
COMMIT;
UPDATE public.demo_orders SET status = 'paid', amount = amount + 1 WHERE id = $next;
DELETE FROM public.demo_orders WHERE id = $((next + 2));
SQL
for _ in $(seq 1 30); do
  same=$(deploy/bin/pg.sh psql -tA -c "SELECT count(*) FROM (SELECT * FROM public.demo_orders EXCEPT SELECT * FROM demo_mirror.demo_orders UNION ALL SELECT * FROM demo_mirror.demo_orders EXCEPT SELECT * FROM public.demo_orders) d")
  [ "$same" = 0 ] && break
  sleep 0.5
done
echo "weir: source public.demo_orders:"
deploy/bin/pg.sh psql -c "SELECT * FROM public.demo_orders ORDER BY id"
echo "weir: streamed by the pipeline into demo_mirror.demo_orders:"
deploy/bin/pg.sh psql -c "SELECT * FROM demo_mirror.demo_orders ORDER BY id"
echo "weir: transactions applied (from the mirror's applied log; the last three are the ones above):"
deploy/bin/pg.sh psql -c "SELECT xid, commit_lsn, applied_at FROM demo_mirror.weir_mirror_applied ORDER BY applied_at DESC LIMIT 5"
echo "weir: pipeline status (GET /admin/pipelines/demo):"
curl -s -H "Authorization: Bearer $token" "http://127.0.0.1:$http_port/admin/pipelines/demo"; echo

cat <<TXT
weir: node ready
  HTTP API:     http://127.0.0.1:$http_port   (health: /health/ready, admin: /admin/cluster)
  cluster:      pekko://weir@127.0.0.1:$cluster_port
  PostgreSQL:   $WEIR_PG_URL  (deploy/bin/pg.sh psql opens a shell)
  admin token:  $( [ -n "${WEIR_ADMIN_TOKEN:-}" ] && echo 'from WEIR_ADMIN_TOKEN' || echo '.weir/admin-token' )
  try:          curl -H "Authorization: Bearer \$(cat .weir/admin-token)" http://127.0.0.1:$http_port/admin/pipelines
                deploy/bin/pg.sh psql -c "INSERT INTO demo_orders VALUES (1000, 'you', 1, 'new')"   (then look in demo_mirror.demo_orders)
  stop:         deploy/bin/run.sh stop
TXT
show_status
