#!/usr/bin/env bash
# Builds Weir, provisions the private PostgreSQL, starts one node in the background with two demo
# CDC pipelines over public.demo_orders (one into the cluster's atomic partitions as collection
# demo_orders, one into the mirror table demo_mirror.demo_orders), writes some changes to the demo
# table and shows them: the mirror, the documents and their revisions in the partitions, their
# outbox, one page of the changes feed with its signed cursor, and a projection consumer reading,
# committing and checkpointing a batch. Then the node's addresses and cluster status.
#   deploy/bin/run.sh          build, start (restarting a node this script started before)
#   deploy/bin/run.sh stop     stop the node and the private PostgreSQL
#   deploy/bin/run.sh status   the node's readiness, pipelines, partitions and cluster status
# The node's log is .weir/node.log; the admin token is WEIR_ADMIN_TOKEN or, when unset, a random
# one kept in .weir/admin-token (mode 600). The demo's last feed cursor is kept in .weir/demo-cursor.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
. deploy/bin/lib.sh
state=$repo/.weir
mkdir -p "$state"

# The demo's names: the collection the partition pipeline writes (from public.demo_orders), the
# projection consumer over it and the collection of the consumer's effects.
collection=demo_orders
stats_collection=demo_order_stats
consumer=demo-totals

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

# api METHOD PATH [JSON]: one request to the node as the administrator (10 s at most). Sets $code
# to the HTTP status (000 when there was no answer); the body is in $state/http-body, the headers in
# $state/http-headers. The token goes to curl as a config file on a pipe, never on a command line.
api() {
  local method=$1 path=$2 body=${3:-}
  local data=()
  [ -n "$body" ] && data=(-H 'Content-Type: application/json' --data-binary "$body")
  code=$(curl -s -m 10 -X "$method" -o "$state/http-body" -D "$state/http-headers" -w '%{http_code}' \
      -K <(printf 'header = "Authorization: Bearer %s"\n' "$(admin_token)") "${data[@]}" \
      "http://127.0.0.1:$http_port$path") || code=000
}

# api_ok METHOD PATH [JSON]: api, failing the script with the node's answer unless it is 2xx.
api_ok() {
  api "$@"
  case "$code" in
    2??) ;;
    *) echo "weir: $1 $2 answered $code: $(head -c 400 "$state/http-body" 2>/dev/null)" >&2; exit 1 ;;
  esac
}

# py SCRIPT ARGS...: a small python3 snippet reading the last answer ($state/http-body) as JSON;
# load(file) keeps numbers exact (99.00 stays 99.00) and compact(value) writes one-line JSON.
pylib='
import json, sys, decimal
def load(path):
    return json.load(open(path), parse_float=decimal.Decimal)
def compact(v):
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k) + ":" + compact(x) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(compact(x) for x in v) + "]"
    return str(v) if isinstance(v, decimal.Decimal) else json.dumps(v)
def etag(path):
    tags = [l.split(":", 1)[1].strip().strip(chr(34)) for l in open(path).read().splitlines() if l.lower().startswith("etag:")]
    return tags[0] if tags else "?"
'
py() { local script=$1; shift; python3 -c "$pylib$script" "$state/http-body" "$@"; }

# wait_for SECONDS WHAT COMMAND...: runs COMMAND every half second until it succeeds or the
# deadline passes (then fails the script saying what it waited for).
wait_for() {
  local limit=$1 what=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "weir: gave up after ${limit} s waiting for $what; see .weir/node.log" >&2
      exit 1
    fi
    sleep 0.5
  done
}

show_status() {
  http_port=$(cat "$state/node.http-port")
  api GET /health/ready
  echo "weir: readiness (GET /health/ready): $(cat "$state/http-body")"
  api GET /admin/pipelines
  echo "weir: pipelines (GET /admin/pipelines):"
  py '
for p in load(sys.argv[1])["pipelines"]:
    print("  %-16s %-9s slot %-21s confirmed %-10s lag %s bytes, %s transactions (%s rows) delivered since start%s" % (
          p["name"], p["state"], p["slot"], p["confirmedLsn"], p["lagBytes"], p["transactions"], p["rows"],
          "; %s: %s" % (p["reason"], p.get("detail")) if p.get("reason") else ""))' || cat "$state/http-body"
  api GET /admin/outbox/status
  echo "weir: partitions (GET /admin/outbox/status):"
  py '
parts = load(sys.argv[1])
print("  %d partitions, %d holding data: %d documents, %d outbox entries, projection consumers: %d" % (
    len(parts), sum(1 for p in parts if p["documents"] or p["outboxEntries"]), sum(p["documents"] for p in parts),
    sum(p["outboxEntries"] for p in parts), sum(len(p.get("consumers") or []) for p in parts)))' || cat "$state/http-body"
  api GET /admin/cluster
  echo "weir: cluster status (GET /admin/cluster):"
  py '
c = load(sys.argv[1])
print("  cluster %s, leader %s, slot owner %s, unreachable: %s" % (c["clusterId"], c.get("leader"), c.get("slotOwner"), ", ".join(c.get("unreachable") or []) or "none"))
for m in c["members"]:
    print("  member %s: %s, %s, roles %s, %d partitions, slots: %s" % (m["address"], m["status"],
          "reachable" if m["reachable"] else "UNREACHABLE", ",".join(m["roles"]), len(m.get("partitions") or []),
          ", ".join("%s=%s" % (s["pipeline"], s["state"]) for s in m.get("slots") or []) or "none"))' || cat "$state/http-body"
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
command -v python3 >/dev/null 2>&1 || {
  if [ "$(id -u)" -eq 0 ]; then DEBIAN_FRONTEND=noninteractive apt-get update -qq && apt-get install -y -qq python3 >&2
  else echo "weir: python3 is missing (it formats the demo's output); install with: sudo apt-get install python3" >&2; exit 1; fi
}

echo "weir: building (mvn package, tests skipped; deploy/bin/test.sh runs them)"
mvn -B -q --no-transfer-progress -Dstyle.color=never -Dspotless.check.skip=true -DskipTests package -pl node -am 2>&1 | sed "s/\x1b\[[0-9;]*m//g"
SECONDS=0

eval "$(deploy/bin/pg.sh start)"
stop_node

# The demo: a source table, one publication per pipeline, and a mirror table one pipeline keeps
# equal to the source.
deploy/bin/pg.sh psql -q -v ON_ERROR_STOP=1 <<'SQL'
SET client_min_messages = warning;
CREATE TABLE IF NOT EXISTS public.demo_orders (
  id int PRIMARY KEY, customer text NOT NULL, amount numeric(10,2), status text NOT NULL);
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'weir_demo') THEN
    CREATE PUBLICATION weir_demo FOR TABLE public.demo_orders;
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'weir_demo_partitions') THEN
    CREATE PUBLICATION weir_demo_partitions FOR TABLE public.demo_orders;
  END IF;
END $$;
CREATE SCHEMA IF NOT EXISTS demo_mirror;
CREATE TABLE IF NOT EXISTS demo_mirror.demo_orders (
  id int PRIMARY KEY, customer text NOT NULL, amount numeric(10,2), status text NOT NULL);
SQL
cat > "$state/node.conf" <<CONF
# Written by deploy/bin/run.sh: the demo pipelines, each on its own slot.
# Into the atomic partitions: each row is a document of collection $collection (id = the primary
# key); the first start loads the rows already in the table (start-mode = snapshot).
weir.pipelines.demo_partitions {
  slot = weir_demo_partitions
  publications = [weir_demo_partitions]
  start-mode = snapshot
  sink {
    type = partitions
    collections { "public.demo_orders" = $collection }
  }
}
# Into a mirror table in PostgreSQL, demo_mirror.demo_orders.
weir.pipelines.demo {
  slot = weir_demo
  publications = [weir_demo]
  sink { type = mirror, target-schema = demo_mirror, applied-log = true }
}
CONF

http_port=${WEIR_HTTP_PORT:-$(weir_free_port 8080)}
cluster_port=${WEIR_CLUSTER_PORT:-$(weir_free_port 25520)}
echo "$http_port" > "$state/node.http-port"
# A demo cluster created by a release before the shard layout was recorded keeps Pekko's layout: a
# node with another one would be refused (docs/partitions.md, ADR 0052).
if [ -z "${WEIR_PARTITION_SHARDS:-}" ]; then
  # 0: no cluster yet; 1: weir.cluster without partition_shards (before migration 19); 2: recorded.
  columns=$(deploy/bin/pg.sh psql -X -tA -c "SELECT count(*) FROM information_schema.columns
    WHERE table_schema = 'weir' AND table_name = 'cluster' AND column_name IN ('cluster_id', 'partition_shards')")
  legacy=0
  case "$columns" in
    1) legacy=$(deploy/bin/pg.sh psql -X -tA -c "SELECT count(*) FROM weir.cluster") ;;
    2) legacy=$(deploy/bin/pg.sh psql -X -tA -c "SELECT count(*) FROM weir.cluster WHERE partition_shards = 0") ;;
  esac
  if [ "${legacy:-0}" -gt 0 ]; then
    echo "weir: the demo cluster in .weir was created before shard layouts were recorded: WEIR_PARTITION_SHARDS=legacy"
    export WEIR_PARTITION_SHARDS=legacy
  fi
fi
WEIR_ADMIN_TOKEN=$(admin_token) WEIR_HTTP_PORT=$http_port WEIR_CLUSTER_PORT=$cluster_port \
  WEIR_MARKS_DIR="${WEIR_MARKS_DIR:-$state/ddata}" nohup java -Xmx512m -jar node/target/weir-node.jar node --config "$state/node.conf" > "$state/node.log" 2>&1 < /dev/null &
echo $! > "$state/node.pid"

printf 'weir: starting node (pid %s, log .weir/node.log) ' "$(cat "$state/node.pid")"
deadline=$((SECONDS + 120))
until curl -sf -m 5 "http://127.0.0.1:$http_port/health/ready" >/dev/null 2>&1; do
  if ! node_running; then
    echo; echo "weir: the node exited during start-up; last log lines:" >&2
    tail -n 30 "$state/node.log" >&2
    exit 1
  fi
  [ "$SECONDS" -lt "$deadline" ] || { echo; echo "weir: node not ready after 120 s; see .weir/node.log" >&2; exit 1; }
  printf '.'; sleep 1
done
echo

pipeline_running() {
  api GET "/admin/pipelines/$1"
  [ "$code" = 200 ] && py 'import json,sys; sys.exit(json.load(open(sys.argv[1])).get("state") != "running")'
}
partitions_running() {
  api GET /admin/partitions
  [ "$code" = 200 ] && py 'import json,sys; b=json.load(open(sys.argv[1])); sys.exit(b["running"] != b["count"])'
}
wait_for 60 "pipeline demo_partitions to run" pipeline_running demo_partitions
wait_for 60 "pipeline demo to run" pipeline_running demo
wait_for 60 "every partition to run" partitions_running
partitions=$(py 'import json,sys; print(json.load(open(sys.argv[1]))["count"])')
echo "weir: pipelines running: demo_partitions (public.demo_orders -> the $partitions partitions, collection $collection), demo (-> demo_mirror.demo_orders)"

# Slots the demo created on an earlier run keep every WAL byte written since (test runs in the same
# clone write gigabytes into this cluster): the pipelines decode it all before the demo's own
# changes arrive. Wait for that, showing how much is left.
backlog_mib() {
  deploy/bin/pg.sh psql -tA -c "SELECT coalesce(max((pg_current_wal_lsn() - confirmed_flush_lsn) / 1048576), 0)::bigint FROM pg_replication_slots WHERE slot_name IN ('weir_demo', 'weir_demo_partitions')"
}
backlog=$(backlog_mib)
if [ "$backlog" -gt 64 ]; then
  echo "weir: the demo's slots are $backlog MiB behind (WAL written since the last run); the pipelines read past it first"
  deadline=$((SECONDS + 1800))
  shown=$SECONDS
  while [ "$backlog" -gt 64 ]; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "weir: gave up after 1800 s waiting for the demo's slots to catch up ($backlog MiB left); see .weir/node.log" >&2
      exit 1
    fi
    if [ $((SECONDS - shown)) -ge 10 ]; then
      echo "weir: $backlog MiB left"
      shown=$SECONDS
    fi
    sleep 1
    backlog=$(backlog_mib)
  done
fi

# A feed cursor at the partitions' current tails, taken before the writes: reading from it shows
# exactly the changes that follow.
api_ok POST /v1/changes/read "{\"collection\":\"$collection\",\"start\":\"now\"}"
start_cursor=$(py 'import json,sys; print(json.load(open(sys.argv[1]))["cursor"])')

base=$(deploy/bin/pg.sh psql -tA -c "SELECT (coalesce(max(id), 0) / 10 + 1) * 10 FROM public.demo_orders")
ids=("$base" "$((base + 1))" "$((base + 2))")
echo "weir: writing demo changes to public.demo_orders: orders ${ids[0]}, ${ids[1]}, ${ids[2]} inserted in one transaction, ${ids[0]} updated, ${ids[2]} deleted"
deploy/bin/pg.sh psql -q -v ON_ERROR_STOP=1 <<SQL
BEGIN;
INSERT INTO public.demo_orders VALUES (${ids[0]}, 'ada', 42.50, 'new'), (${ids[1]}, 'grace', 7.25, 'new'), (${ids[2]}, 'linus', 99.00, 'new');
COMMIT;
UPDATE public.demo_orders SET status = 'paid', amount = amount + 1 WHERE id = ${ids[0]};
DELETE FROM public.demo_orders WHERE id = ${ids[2]};
SQL

mirror_equal() {
  [ "$(deploy/bin/pg.sh psql -tA -c "SELECT count(*) FROM (SELECT * FROM public.demo_orders EXCEPT SELECT * FROM demo_mirror.demo_orders UNION ALL SELECT * FROM demo_mirror.demo_orders EXCEPT SELECT * FROM public.demo_orders) d")" = 0 ]
}
# The five changes (three inserts, an update, a delete) on the feed after the start cursor.
feed_complete() {
  api POST /v1/changes/read "{\"collection\":\"$collection\",\"cursor\":\"$start_cursor\"}"
  [ "$code" = 200 ] && py 'import json,sys; ids=set(sys.argv[2:]); sys.exit(sum(c["id"] in ids for c in json.load(open(sys.argv[1]))["changes"]) < 5)' "${ids[@]}"
}
wait_for 30 "the mirror to equal the source" mirror_equal
wait_for 30 "the five changes to reach the partitions" feed_complete
cp "$state/http-body" "$state/demo-page.json"

echo
echo "== CDC into a mirror table: demo_mirror.demo_orders equals public.demo_orders (last 5 rows)"
deploy/bin/pg.sh psql -c "SELECT * FROM (SELECT * FROM demo_mirror.demo_orders ORDER BY id DESC LIMIT 5) r ORDER BY id"

# The partition of a document: murmur3_x86_32(collection 0x00 id) mod P (docs/partitions.md).
murmur='
def murmur3(data):
    m = 0xffffffff
    rotl = lambda x, r: ((x << r) | (x >> (32 - r))) & m
    h, n = 0, len(data)
    for i in range(0, n - n % 4, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = rotl((k * 0xcc9e2d51) & m, 15) * 0x1b873593 & m
        h = (rotl(h ^ k, 13) * 5 + 0xe6546b64) & m
    t, k = n - n % 4, 0
    if n & 3 >= 3: k ^= data[t + 2] << 16
    if n & 3 >= 2: k ^= data[t + 1] << 8
    if n & 3 >= 1:
        k ^= data[t]
        h ^= rotl((k * 0xcc9e2d51) & m, 15) * 0x1b873593 & m
    h ^= n
    h = ((h ^ (h >> 16)) * 0x85ebca6b) & m
    h = ((h ^ (h >> 13)) * 0xc2b2ae35) & m
    return h ^ (h >> 16)
def partition_of(collection, key, count):
    return murmur3(collection.encode() + b"\0" + key.encode()) % count
'

echo
echo "== 1. The changes in the atomic partitions"
echo "documents and their revisions (GET /v1/documents/$collection/{id}; the revision is the ETag):"
for id in "${ids[@]}"; do
  api GET "/v1/documents/$collection/$id"
  py "$murmur"'
body, collection, key, count, code = load(sys.argv[1]), sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
where = "id %-4s partition %-3d" % (key, partition_of(collection, key, count))
if code == "200":
    print("  %s revision %s  %s" % (where, etag(sys.argv[2]), compact(body)))
else:
    print("  %s %s %s (deleted: its tombstone is a revision of its own, shown in the feed below)" % (where, code, body.get("error")))
' "$state/http-headers" "$collection" "$id" "$partitions" "$code"
done
touched=$(python3 -c 'import json,sys; print(" ".join(sorted({str(c["partition"]) for c in json.load(open(sys.argv[1]))["changes"] if c["id"] in sys.argv[2:]}, key=int)))' "$state/demo-page.json" "${ids[@]}")
echo "their partitions' outboxes (GET /admin/outbox/status?partition=N):"
for p in $touched; do
  api_ok GET "/admin/outbox/status?partition=$p"
  py '
s = load(sys.argv[1])
marks = ", ".join("%s (%s...)" % (lsn, source[:24]) for source, lsn in sorted(s["watermarks"].items()))
print("  partition %-3d documents %d, outbox positions %d..%d (%d %s, %d bytes), CDC watermark %s" % (
    s["partition"], s["documents"], s["outboxFirst"], s["outboxNext"] - 1, s["outboxEntries"],
    "entry" if s["outboxEntries"] == 1 else "entries", s["outboxBytes"], marks or "-"))'
done
api_ok GET /admin/outbox/status
py '
import json, sys
parts = json.load(open(sys.argv[1]))
print("  all %d partitions: %d documents, %d outbox entries" % (len(parts), sum(p["documents"] for p in parts), sum(p["outboxEntries"] for p in parts)))'

echo
echo "== 2. The changes feed (POST /v1/changes/read, read as the administrator)"
echo "one page from a cursor taken before the writes ({\"collection\":\"$collection\",\"cursor\":...}):"
python3 -c "$pylib"'
page = load(sys.argv[1])
img = lambda d: "-" if d is None else compact({k: v for k, v in d.items() if k != "id"})
for c in page["changes"]:
    print("  partition %-3d #%-3d %-10s %-6s id %-4s rev %d  before %s  after %s" % (c["partition"], c["sequence"],
          c.get("commitLsn", "-"), c["kind"], c["id"], c["revision"], img(c.get("before")), img(c.get("after"))))
cursor = page["cursor"]
open(sys.argv[2], "w").write(cursor)
print("  hasMore: %s; next cursor: ...%s (%d characters, HMAC-signed; all of it in .weir/demo-cursor)" % (
      str(page["hasMore"]).lower(), cursor[-8:], len(cursor)))' "$state/demo-page.json" "$state/demo-cursor"

echo
proj_partition=$(python3 -c 'import json,sys; print(next(c["partition"] for c in json.load(open(sys.argv[1]))["changes"] if c["id"] == sys.argv[2]))' "$state/demo-page.json" "${ids[0]}")
echo "== 3. A projection consumer, \"$consumer\", on partition $proj_partition (POST /admin/projections/...)"
ident="\"partition\":$proj_partition,\"consumer\":\"$consumer\",\"generation\":1"
api_ok POST /admin/projections/configure "{$ident,\"collections\":[\"$collection\"]}"
py 'import json,sys; b=json.load(open(sys.argv[1])); print("  configure: %s, checkpoint %s" % ("created" if b.get("created") else "already configured", b["consumer"]["checkpoint"]))'
api_ok POST /admin/projections/read "{$ident,\"maxEntries\":100}"
cp "$state/http-body" "$state/demo-batch.json"
python3 -c '
import json, sys
b = json.load(open(sys.argv[1]))
span = "positions %d..%d" % (b["start"] + 1, b["through"]) if b["through"] > b["start"] else "no new positions"
print("  read:      %s after checkpoint %d: %d %s, hasMore %s, signed batch token ...%s" % (
      span, b["start"], len(b["entries"]), "entry" if len(b["entries"]) == 1 else "entries",
      str(b["hasMore"]).lower(), b["token"][-8:]))
for e in b["entries"]:
    print("             #%-3d %-6s %s id %s rev %d" % (e["sequence"], e["kind"], e["collection"], e["id"], e["revision"]))' "$state/demo-batch.json"
# The projection's effect: a running count of what it has read, one document in the same partition
# (effects may only target the batch's partition, so its id is chosen to hash there).
stats_id=$(python3 -c "$murmur"'
import sys
p, count = int(sys.argv[1]), int(sys.argv[2])
print(next("totals-%d" % i for i in range(1000000) if partition_of(sys.argv[3], "totals-%d" % i, count) == p))' "$proj_partition" "$partitions" "$stats_collection")
api GET "/v1/documents/$stats_collection/$stats_id"
if [ "$code" = 200 ]; then cp "$state/http-body" "$state/demo-stats.json"; else echo '{}' > "$state/demo-stats.json"; fi
commit=$(python3 -c "$pylib"'
b, current = load(sys.argv[1]), load(sys.argv[2])
revision = int(etag(sys.argv[3])) if current else 0
req = {"token": b["token"]}
if b["through"] > b["start"]:
    doc = {"partition": int(sys.argv[5]), "entries": current.get("entries", 0) + len(b["entries"]),
           "upserts": current.get("upserts", 0) + sum(e["kind"] == "upsert" for e in b["entries"]),
           "deletes": current.get("deletes", 0) + sum(e["kind"] == "delete" for e in b["entries"]),
           "through": b["through"]}
    req["effects"] = [{"op": "upsert", "collection": sys.argv[4], "id": sys.argv[6], "expectedRevision": revision, "document": doc}]
print(json.dumps(req, separators=(",", ":")))' "$state/demo-batch.json" "$state/demo-stats.json" "$state/http-headers" "$stats_collection" "$proj_partition" "$stats_id")
api_ok POST /admin/projections/commit "$commit"
py 'import json,sys; b=json.load(open(sys.argv[1])); print("  commit:    checkpoint %s (alreadyProcessed %s), with its effect in the same journal event:" % (b["checkpoint"], str(b["alreadyProcessed"]).lower()))'
api_ok GET "/v1/documents/$stats_collection/$stats_id"
py 'print("             %s/%s revision %s  %s" % (sys.argv[3], sys.argv[4], etag(sys.argv[2]), compact(load(sys.argv[1]))))' \
  "$state/http-headers" "$stats_collection" "$stats_id"
api_ok GET "/admin/outbox/status?partition=$proj_partition"
py '
s = load(sys.argv[1])
for c in s.get("consumers") or []:
    print("  checkpoint (GET /admin/outbox/status?partition=%d): %s generation %d at %d, lag %d%s" % (
          s["partition"], c["consumer"], c["generation"], c["checkpoint"], c["lag"], " (released)" if c.get("released") else ""))
print("             (lag: outbox positions after the checkpoint, such as the effect'"'"'s own entry, which the filter skips)")'

if [ -n "${WEIR_ADMIN_TOKEN:-}" ]; then auth='$WEIR_ADMIN_TOKEN'; else auth='$(cat .weir/admin-token)'; fi
echo
cat <<TXT
weir: node ready (demo done ${SECONDS} s after the build)
  HTTP API:     http://127.0.0.1:$http_port   (health: /health/ready, admin: /admin/cluster, contract: /openapi.json)
  console:      http://127.0.0.1:$http_port/console   (sign in with the admin token)
  cluster:      pekko://weir@127.0.0.1:$cluster_port
  PostgreSQL:   $WEIR_PG_URL  (deploy/bin/pg.sh psql opens a shell)
  admin token:  $( [ -n "${WEIR_ADMIN_TOKEN:-}" ] && echo 'from WEIR_ADMIN_TOKEN' || echo 'in .weir/admin-token' )
  try:          deploy/bin/pg.sh psql -c "INSERT INTO demo_orders VALUES (1000, 'you', 1, 'new')"
                curl -H "Authorization: Bearer $auth" http://127.0.0.1:$http_port/v1/documents/$collection/1000
                curl -H "Authorization: Bearer $auth" -H 'Content-Type: application/json' \\
                  -d "{\"collection\":\"$collection\",\"cursor\":\"\$(cat .weir/demo-cursor)\"}" http://127.0.0.1:$http_port/v1/changes/read
                deploy/bin/weir ctl --url http://127.0.0.1:$http_port $( [ -n "${WEIR_ADMIN_TOKEN:-}" ] || echo '--token-file .weir/admin-token ')outbox status   (docs/cli.md)
  status, stop: deploy/bin/run.sh status, deploy/bin/run.sh stop
TXT
show_status
