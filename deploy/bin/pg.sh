#!/usr/bin/env bash
# Provision and run a private PostgreSQL cluster for Weir's demo and tests.
#
#   deploy/bin/pg.sh start     create (first time) and start; prints the connection settings
#   deploy/bin/pg.sh stop      fast shutdown; leaves no process behind
#   deploy/bin/pg.sh status    running or not, and where
#   deploy/bin/pg.sh env       shell lines: export WEIR_PG_URL=... WEIR_PG_USER=... WEIR_PG_PASSWORD=...
#   deploy/bin/pg.sh url       the JDBC URL only
#   deploy/bin/pg.sh psql ...  psql connected to the private cluster
#   deploy/bin/pg.sh kill      SIGKILL the postmaster (crash tests); `start` recovers it
#   deploy/bin/pg.sh destroy   stop and delete the data directory
#
# The cluster lives in WEIR_PG_HOME (default: <repo>/.weir/pg, ignored by git). It listens on
# 127.0.0.1 only, on a free port chosen at start (WEIR_PG_PORT_BASE, default 15432, and up; a port
# lost to another listener before the bind is retried on the next), with wal_level=logical and room for replication
# slots. initdb refuses to run as root, so as root every server command runs as the `postgres`
# user; if that user cannot enter the repository folder, the cluster moves to
# /var/tmp/weir-pg-<hash of the repo path>. Every command is idempotent.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PG_MAJOR_MIN=15

log() { printf 'pg.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

is_root() { [ "$(id -u)" -eq 0 ]; }

# Run a command as the cluster's owner.
as_owner() {
  # From /, since the postgres user may not be allowed into the caller's working directory.
  if is_root; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

find_bindir() {
  if [ -n "${WEIR_PG_BINDIR:-}" ]; then echo "$WEIR_PG_BINDIR"; return; fi
  local best="" v
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] || continue
    v=$(basename "$(dirname "$d")")
    if [ "$v" -ge "$PG_MAJOR_MIN" ] 2>/dev/null && { [ -z "$best" ] || [ "$v" -gt "$(basename "$(dirname "$best")")" ]; }; then
      best=$d
    fi
  done
  if [ -z "$best" ] && command -v initdb >/dev/null 2>&1; then best=$(dirname "$(command -v initdb)"); fi
  echo "$best"
}

ensure_binaries() {
  BIN=$(find_bindir)
  if [ -z "$BIN" ]; then
    if is_root && command -v apt-get >/dev/null 2>&1; then
      log "PostgreSQL server binaries not found; installing Debian's postgresql package"
      DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
      BIN=$(find_bindir)
    fi
    [ -n "$BIN" ] || die "PostgreSQL ${PG_MAJOR_MIN}+ server binaries not found. Install them with: sudo apt-get install postgresql (or set WEIR_PG_BINDIR to the folder holding initdb and pg_ctl)"
  fi
  if is_root; then
    id postgres >/dev/null 2>&1 || die "running as root needs the 'postgres' user to own the cluster (it comes with Debian's postgresql package: apt-get install postgresql)"
    command -v runuser >/dev/null 2>&1 || die "running as root needs runuser (Debian package util-linux)"
  fi
}

# Where the cluster lives; as root, somewhere the postgres user can reach.
resolve_home() {
  if [ -n "${WEIR_PG_HOME:-}" ]; then PGHOME=$WEIR_PG_HOME; return; fi
  PGHOME=$repo/.weir/pg
  if is_root && ! runuser -u postgres -- sh -c 'cd "$1"' _ "$repo" 2>/dev/null; then
    local h; h=$(printf '%s' "$repo" | sha256sum | cut -c1-12)
    PGHOME=/var/tmp/weir-pg-$h
  fi
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Ports come from WEIR_PG_PORT_BASE (default 15432) upwards, below Linux's ephemeral range
# (32768-60999): a port there can be taken by any outbound connection between the pick and the
# server's bind. Below it only listeners compete, and a lost race is retried on the next port.
PORT_BASE=${WEIR_PG_PORT_BASE:-15432}
case "$PORT_BASE" in ''|*[!0-9]*) die "WEIR_PG_PORT_BASE must be a port number" ;; esac

# pick_port [FROM]: the first port at or above FROM (default the base) that nothing listens on.
pick_port() {
  local p from=${1:-$PORT_BASE}
  for p in $(seq "$from" 1 "$(( PORT_BASE + 200 ))"); do
    if ! port_in_use "$p"; then echo "$p"; return; fi
  done
  die "no free loopback port found in $PORT_BASE..$(( PORT_BASE + 200 ))"
}

running() { [ -f "$PGHOME/data/postmaster.pid" ] && as_owner "$BIN/pg_ctl" -D "$PGHOME/data" status >/dev/null 2>&1; }

init_cluster() {
  log "creating a private PostgreSQL cluster in $PGHOME"
  mkdir -p "$PGHOME/run"
  umask 077
  head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' > "$PGHOME/password"
  if is_root; then chown -R postgres: "$PGHOME"; chmod 700 "$PGHOME"; fi
  as_owner "$BIN/initdb" -D "$PGHOME/data" -U weir --pwfile="$PGHOME/password" \
    --auth=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >"$PGHOME/initdb.log" 2>&1 \
    || { cat "$PGHOME/initdb.log" >&2; die "initdb failed (log above)"; }
  # Settings Weir needs: logical decoding, room for several pipelines' slots and wal senders,
  # prepared transactions for two-phase decoding tests, enough connections for 3 nodes + tests.
  as_owner sh -c "cat >> '$PGHOME/data/postgresql.conf'" <<CONF

# --- Weir private cluster (deploy/bin/pg.sh) ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$PGHOME/run'
wal_level = logical
max_replication_slots = 32
max_wal_senders = 32
max_prepared_transactions = 16
max_connections = 300
shared_buffers = 128MB
logging_collector = off
log_min_messages = warning
CONF
  touch "$PGHOME/.initialised"
}

start() {
  ensure_binaries
  resolve_home
  exec 9>"${TMPDIR:-/tmp}/weir-pg-$(printf '%s' "$PGHOME" | sha256sum | cut -c1-12).lock"
  flock 9
  [ -f "$PGHOME/.initialised" ] || { rm -rf "$PGHOME"; init_cluster; }
  if running; then
    port=$(cat "$PGHOME/port")
  else
    # Keep the previous port when it is still free, so clients configured with the URL reconnect.
    if [ -f "$PGHOME/port" ] && ! port_in_use "$(cat "$PGHOME/port")"; then
      port=$(cat "$PGHOME/port")
    else
      port=$(pick_port)
    fi
    # A port can still be taken between the check and PostgreSQL's bind: then take the next free
    # one (at most 5 tries). Any other start failure ends here with the server's log.
    local attempt=1 marker
    while :; do
      echo "$port" > "$PGHOME/port"
      marker=0
      [ -f "$PGHOME/postgres.log" ] && marker=$(wc -c < "$PGHOME/postgres.log")
      if as_owner "$BIN/pg_ctl" -D "$PGHOME/data" -l "$PGHOME/postgres.log" -w -t 60 \
          -o "-p $port" start >/dev/null 2>&1 9>&-; then
        break
      fi
      if [ "$attempt" -lt 5 ] && tail -c +"$((marker + 1))" "$PGHOME/postgres.log" 2>/dev/null \
          | grep -q -e 'could not bind' -e 'Address already in use'; then
        log "port $port was taken before PostgreSQL could bind it; trying another"
        attempt=$((attempt + 1))
        port=$(pick_port "$((port + 1))")
        continue
      fi
      tail -n 30 "$PGHOME/postgres.log" >&2 || true
      die "PostgreSQL did not start (log: $PGHOME/postgres.log)"
    done
    log "PostgreSQL started on 127.0.0.1:$port (data: $PGHOME/data)"
    local pw; pw=$(cat "$PGHOME/password")
    if ! PGPASSWORD=$pw "$BIN/psql" -h 127.0.0.1 -p "$port" -U weir -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = 'weir'" | grep -q 1; then
      PGPASSWORD=$pw "$BIN/psql" -h 127.0.0.1 -p "$port" -U weir -d postgres -qc "CREATE DATABASE weir" >&2
    fi
  fi
  print_env
}

print_env() {
  local port; port=$(cat "$PGHOME/port")
  printf "export WEIR_PG_URL='jdbc:postgresql://127.0.0.1:%s/weir'\n" "$port"
  printf "export WEIR_PG_USER='weir'\n"
  printf "export WEIR_PG_PASSWORD='%s'\n" "$(cat "$PGHOME/password")"
  printf "export WEIR_PG_HOME='%s'\n" "$PGHOME"
  printf "export WEIR_PG_BINDIR='%s'\n" "$BIN"
}

require_running() {
  ensure_binaries; resolve_home
  running || die "the private PostgreSQL is not running; start it with: deploy/bin/pg.sh start"
}

stop() {
  ensure_binaries; resolve_home
  if running; then
    as_owner "$BIN/pg_ctl" -D "$PGHOME/data" -m fast -w -t 60 stop >/dev/null \
      || as_owner "$BIN/pg_ctl" -D "$PGHOME/data" -m immediate -w stop >/dev/null
    log "PostgreSQL stopped"
  else
    log "PostgreSQL was not running"
  fi
}

cmd=${1:-status}; shift || true
case "$cmd" in
  start) start ;;
  stop) stop ;;
  status)
    ensure_binaries; resolve_home
    if running; then echo "running on 127.0.0.1:$(cat "$PGHOME/port") (data: $PGHOME/data)"; else echo "stopped (data: $PGHOME/data)"; exit 3; fi ;;
  env) require_running; print_env ;;
  url) require_running; echo "jdbc:postgresql://127.0.0.1:$(cat "$PGHOME/port")/weir" ;;
  psql)
    require_running
    PGPASSWORD=$(cat "$PGHOME/password") exec "$BIN/psql" -h 127.0.0.1 -p "$(cat "$PGHOME/port")" -U weir -d weir "$@" ;;
  kill)
    require_running
    kill -9 "$(head -1 "$PGHOME/data/postmaster.pid")"
    log "postmaster killed with SIGKILL" ;;
  destroy)
    stop
    rm -rf "$PGHOME"
    log "removed $PGHOME" ;;
  *) die "unknown command '$cmd' (start|stop|status|env|url|psql|kill|destroy)" ;;
esac
