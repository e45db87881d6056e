#!/usr/bin/env bash
# A private PostgreSQL with RF3 storage for Weir's local use and failover tests: a primary and two
# streaming standbys on loopback ports, with quorum commit (a commit waits for at least one
# standby, so every acknowledged commit is on 2 of 3 copies, 3 once caught up).
#
#   deploy/bin/pg-rf3.sh start         create (first time) and start every member that is not fenced
#   deploy/bin/pg-rf3.sh stop          fast shutdown of every member; leaves no process behind
#   deploy/bin/pg-rf3.sh status        each member's role, port and state, and the replication state
#   deploy/bin/pg-rf3.sh env           shell lines: export WEIR_PG_URL=... (multi-host) WEIR_PG_USER=...
#   deploy/bin/pg-rf3.sh promote       fail over: fence the primary, promote the most advanced standby
#   deploy/bin/pg-rf3.sh kill-primary  SIGKILL the primary's postmaster and its server processes
#   deploy/bin/pg-rf3.sh rejoin [M]    bring a fenced member (the old primary) back as a standby
#   deploy/bin/pg-rf3.sh destroy       stop and delete everything
#
# Members are named p (the first primary), s1 and s2 (the first standbys); a member's name is its
# application_name and its physical replication slot's name when it streams as a standby.
# The cluster lives in WEIR_PG_RF3_HOME (default: <repo>/.weir/pg-rf3, ignored by git): one folder
# per member (data, port, log), the password, a passfile for replication, and `primary`, the name of
# the current primary. Clients connect with
#   jdbc:postgresql://127.0.0.1:<p>,127.0.0.1:<s1>,127.0.0.1:<s2>/weir?targetServerType=primary
# and pgjdbc finds whichever member is the primary. Ports are chosen at first start (from
# WEIR_PG_RF3_PORT_BASE, default 15700, below the ephemeral range) and kept, so the URL does not change.
#
# promote: (1) fences the current primary: stops it if it still runs (immediate shutdown), writes
# standby.signal into its data folder (started by hand it comes up read-only, never as a primary)
# and marks it fenced (this script does not start it again until `rejoin` makes it a standby of
# the new primary); (2) picks the standby with the highest received WAL position
# (pg_last_wal_receive_lsn, else pg_last_wal_replay_lsn); (3) sets its synchronous_standby_names to
# 'ANY 1 (<the other standby>)' while it is still a standby, so from its first commit as primary a
# commit waits for the surviving standby; (4) promotes it (pg_ctl promote); (5) creates the survivor's
# physical slot on it and re-points the survivor (primary_conninfo, then a restart), which follows
# the new timeline. When the primary is running and is not in recovery, promote does nothing
# unless given --force (a planned switchover). Without a surviving standby, commits on the new
# primary wait (fail closed) until one streams again.
#
# rejoin [member]: turns a fenced member (default: the only one) into a standby of the current
# primary. pg_rewind (which first finishes the member's crash recovery in single-user mode) winds
# its data folder back to where its timeline left the primary's, so WAL it wrote that no standby
# received, and so no client saw acknowledged, is discarded; if pg_rewind cannot (the WAL it needs
# is gone), the folder is copied again with pg_basebackup. Then the member streams from the
# primary through its own physical slot and synchronous_standby_names becomes 'ANY 1 (<both
# standbys>)' again: every later commit is on 2 of 3 copies, 3 once caught up.
#
# As root, every server command runs as the `postgres` user (initdb refuses root), so the home
# must be a folder that user can enter; the default moves to /var/tmp/weir-pg-rf3-<hash> when the
# repository is not reachable for it. Logs name members, ports and LSNs, never row values.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PG_MAJOR_MIN=15
MEMBERS=(p s1 s2)

log() { printf 'pg-rf3.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

is_root() { [ "$(id -u)" -eq 0 ]; }

as_owner() {
  if is_root; then (cd / && runuser -u postgres -- "$@"); else (cd / && "$@"); fi
}

find_bindir() {
  if [ -n "${WEIR_PG_BINDIR:-}" ]; then echo "$WEIR_PG_BINDIR"; return; fi
  local best="" v d
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
  [ -n "$BIN" ] || die "PostgreSQL ${PG_MAJOR_MIN}+ server binaries not found. Install them with: sudo apt-get install postgresql (or set WEIR_PG_BINDIR to the folder holding initdb and pg_ctl)"
  [ -x "$BIN/pg_basebackup" ] || die "pg_basebackup not found in $BIN"
  if is_root; then
    id postgres >/dev/null 2>&1 || die "running as root needs the 'postgres' user to own the cluster (apt-get install postgresql)"
    command -v runuser >/dev/null 2>&1 || die "running as root needs runuser (Debian package util-linux)"
  fi
}

resolve_home() {
  if [ -n "${WEIR_PG_RF3_HOME:-}" ]; then
    H=$WEIR_PG_RF3_HOME
  else
    H=$repo/.weir/pg-rf3
    if is_root && ! runuser -u postgres -- sh -c 'cd "$1"' _ "$repo" 2>/dev/null; then
      H=/var/tmp/weir-pg-rf3-$(printf '%s' "$repo" | sha256sum | cut -c1-12)
    fi
  fi
  if is_root; then
    local parent; parent=$(dirname "$H")
    [ -d "$parent" ] || mkdir -p "$parent"
    runuser -u postgres -- sh -c 'cd "$1"' _ "$parent" 2>/dev/null \
      || die "the postgres user cannot enter $parent; choose a WEIR_PG_RF3_HOME it can reach (e.g. under /var/tmp)"
  fi
}

lock() {
  exec 9>"${TMPDIR:-/tmp}/weir-pg-rf3-$(printf '%s' "$H" | sha256sum | cut -c1-12).lock"
  flock 9
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A free loopback port not in the list of ports already taken by this cluster's members.
pick_port() {
  local p base=${WEIR_PG_RF3_PORT_BASE:-15700} taken=" $* "
  for p in $(seq "$base" 1 "$((base + 300))"); do
    case "$taken" in *" $p "*) continue ;; esac
    if ! port_in_use "$p"; then echo "$p"; return; fi
  done
  die "no free loopback port found from $base on"
}

port_of() { cat "$H/$1/port"; }
password() { cat "$H/password"; }
primary_name() { cat "$H/primary"; }
is_fenced() { [ -f "$H/$1/fenced" ]; }

running() {
  [ -f "$H/$1/data/postmaster.pid" ] && as_owner "$BIN/pg_ctl" -D "$H/$1/data" status >/dev/null 2>&1
}

# psql against member $1 (database postgres), tuples only; the SQL comes on the command line.
q() {
  local m=$1; shift
  PGPASSWORD=$(password) PGCONNECT_TIMEOUT=5 "$BIN/psql" -X -h 127.0.0.1 -p "$(port_of "$m")" -U weir -d postgres -v ON_ERROR_STOP=1 -tAqc "$@"
}

in_recovery() { [ "$(q "$1" 'SELECT pg_is_in_recovery()')" = t ]; }
accepts_writes() { [ "$(q "$1" 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ]; }

conninfo_for() { # conninfo_for <upstream> <application name>
  printf "host=127.0.0.1 port=%s user=weir passfile=%s application_name=%s" "$(port_of "$1")" "$H/pgpass" "$2"
}

# start_member <name> [movable]: starts a member on its port. A member that nobody refers to by
# port yet (movable: during init, before any standby or client has its port) whose port is taken
# before its bind moves to another free port, at most 5 times; afterwards the port is kept, so
# standbys' primary_conninfo and clients' URLs stay valid, and a taken port is an error.
start_member() {
  local m=$1 movable=${2:-} port attempt=1 marker taken_ports
  if running "$m"; then return; fi
  while :; do
    port=$(port_of "$m")
    if port_in_use "$port"; then
      [ -n "$movable" ] && [ "$attempt" -lt 5 ] || die "port $port of member $m is taken by another process"
    else
      marker=0
      [ -f "$H/$m/postgres.log" ] && marker=$(wc -c < "$H/$m/postgres.log")
      if as_owner "$BIN/pg_ctl" -D "$H/$m/data" -l "$H/$m/postgres.log" -w -t 60 -o "-p $port" start >/dev/null 2>&1 9>&-; then
        break
      fi
      if [ -z "$movable" ] || [ "$attempt" -ge 5 ] || ! tail -c +"$((marker + 1))" "$H/$m/postgres.log" 2>/dev/null \
          | grep -q -e 'could not bind' -e 'Address already in use'; then
        tail -n 30 "$H/$m/postgres.log" >&2 || true; die "member $m did not start (log: $H/$m/postgres.log)"
      fi
    fi
    log "port $port of member $m was taken before its bind; moving it to another"
    attempt=$((attempt + 1))
    taken_ports=$(for o in "${MEMBERS[@]}"; do cat "$H/$o/port"; done)
    # shellcheck disable=SC2086
    pick_port $taken_ports > "$H/$m/port.new"
    mv "$H/$m/port.new" "$H/$m/port"
  done
  log "member $m started on 127.0.0.1:$port"
}

stop_member() { # stop_member <name> <mode>
  local m=$1 mode=${2:-fast}
  if running "$m"; then
    as_owner "$BIN/pg_ctl" -D "$H/$m/data" -m "$mode" -w -t 60 stop >/dev/null \
      || as_owner "$BIN/pg_ctl" -D "$H/$m/data" -m immediate -w -t 60 stop >/dev/null
    log "member $m stopped ($mode)"
  fi
}

# Server processes of member $1 that outlived a killed postmaster: the pids whose working folder is
# this member's data folder (read from /proc in one pass), none of them chosen by name.
leftover_pids() {
  local d; d=$(readlink -f "$H/$1/data")
  { find /proc -mindepth 2 -maxdepth 2 -name cwd -lname "$d" 2>/dev/null || true; } | cut -d/ -f3
}

init_cluster() {
  log "creating an RF3 PostgreSQL cluster (primary + 2 standbys) in $H"
  rm -rf "$H"
  mkdir -p "$H/run" "$H/p" "$H/s1" "$H/s2"
  ( umask 077
    head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' > "$H/password"
    printf '127.0.0.1:*:*:weir:%s\n' "$(cat "$H/password")" > "$H/pgpass" )
  local ports=() m
  for m in "${MEMBERS[@]}"; do
    ports+=("$(pick_port "${ports[@]}")")
    echo "${ports[-1]}" > "$H/$m/port"
  done
  if is_root; then chown -R postgres: "$H"; fi
  chmod 700 "$H"
  as_owner "$BIN/initdb" -D "$H/p/data" -U weir --pwfile="$H/password" \
    --auth=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >"$H/initdb.log" 2>&1 \
    || { cat "$H/initdb.log" >&2; die "initdb failed (log above)"; }
  # Copied to the standbys by pg_basebackup. synchronous_standby_names is set after the standbys
  # stream (ALTER SYSTEM on the primary only), else creating the database would wait for them.
  as_owner sh -c "cat >> '$H/p/data/postgresql.conf'" <<CONF

# --- Weir RF3 cluster (deploy/bin/pg-rf3.sh) ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$H/run'
wal_level = logical
max_replication_slots = 32
max_wal_senders = 32
max_prepared_transactions = 16
max_connections = 300
shared_buffers = 128MB
hot_standby = on
wal_log_hints = on
wal_keep_size = 256MB
synchronous_commit = on
wal_receiver_status_interval = 1s
logging_collector = off
log_min_messages = warning
CONF
  echo p > "$H/primary"
  start_member p movable
  q p "CREATE DATABASE weir" >/dev/null
  local s
  for s in s1 s2; do
    q p "SELECT pg_create_physical_replication_slot('$s', true)" >/dev/null
    as_owner env PGPASSFILE="$H/pgpass" "$BIN/pg_basebackup" -D "$H/$s/data" -d "$(conninfo_for p "$s")" \
      -R -X stream -S "$s" -c fast >"$H/$s/basebackup.log" 2>&1 \
      || { cat "$H/$s/basebackup.log" >&2; die "pg_basebackup for $s failed (log above)"; }
    start_member "$s" movable
  done
  q p "ALTER SYSTEM SET synchronous_standby_names = 'ANY 1 (s1, s2)'" >/dev/null
  q p "SELECT pg_reload_conf()" >/dev/null
  touch "$H/.initialised"
}

# Waits (up to $2 seconds) until the primary reports standby $1 streaming.
await_streaming() {
  local s=$1 limit=${2:-60} i
  for ((i = 0; i < limit * 5; i++)); do
    [ "$(q "$(primary_name)" "SELECT count(*) FROM pg_stat_replication WHERE application_name = '$s' AND state = 'streaming'" 2>/dev/null)" = 1 ] && return 0
    sleep 0.2
  done
  return 1
}

start() {
  lock
  [ -f "$H/.initialised" ] || init_cluster
  local pm m; pm=$(primary_name)
  is_fenced "$pm" && die "the recorded primary $pm is fenced; run promote"
  start_member "$pm"
  for m in "${MEMBERS[@]}"; do
    [ "$m" = "$pm" ] || is_fenced "$m" || start_member "$m"
  done
  for m in "${MEMBERS[@]}"; do
    [ "$m" = "$pm" ] || is_fenced "$m" || await_streaming "$m" 60 || log "warning: standby $m is not streaming yet"
  done
  print_env
}

print_env() {
  local urls="" m
  for m in "${MEMBERS[@]}"; do urls+="${urls:+,}127.0.0.1:$(port_of "$m")"; done
  printf "export WEIR_PG_URL='jdbc:postgresql://%s/weir?targetServerType=primary'\n" "$urls"
  printf "export WEIR_PG_USER='weir'\n"
  printf "export WEIR_PG_PASSWORD='%s'\n" "$(password)"
  printf "export WEIR_PG_RF3_HOME='%s'\n" "$H"
  printf "export WEIR_PG_BINDIR='%s'\n" "$BIN"
}

stop() {
  [ -f "$H/.initialised" ] || { log "no cluster in $H"; return 0; }
  local m
  # Standbys first, so the primary's fast shutdown does not wait for them to catch up on anything.
  for m in s1 s2 p; do
    [ "$m" = "$(primary_name)" ] || stop_member "$m" fast
  done
  stop_member "$(primary_name)" fast
}

status() {
  [ -f "$H/.initialised" ] || { echo "no cluster (home: $H)"; exit 3; }
  local m role state pm; pm=$(primary_name)
  for m in "${MEMBERS[@]}"; do
    if is_fenced "$m"; then role=fenced; elif [ "$m" = "$pm" ]; then role=primary; else role=standby; fi
    if running "$m"; then
      state=running
      if in_recovery "$m" 2>/dev/null; then state+=" (in recovery)"; else state+=" (read-write)"; fi
    else
      state=stopped
    fi
    echo "$m: $role on 127.0.0.1:$(port_of "$m"), $state"
  done
  if running "$pm"; then
    echo "replication (primary $pm): synchronous_standby_names = $(q "$pm" 'SHOW synchronous_standby_names')"
    q "$pm" "SELECT application_name || ': ' || state || ', ' || sync_state FROM pg_stat_replication ORDER BY 1" | sed 's/^/  /'
  else
    echo "the primary $pm is not running"
    exit 3
  fi
}

kill_primary() {
  local pm pid kids; pm=$(primary_name)
  running "$pm" || die "the primary $pm is not running"
  pid=$(head -1 "$H/$pm/data/postmaster.pid")
  kids=$(pgrep -P "$pid" || true)
  kill -9 "$pid" $kids 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  log "primary $pm: postmaster and its $(echo $kids | wc -w) server processes killed with SIGKILL"
}

fence() {
  local m=$1 pid
  if running "$m"; then
    stop_member "$m" immediate
  fi
  # A SIGKILLed postmaster may leave server processes that end on their own; wait, then kill them.
  for _ in $(seq 1 50); do
    pid=$(leftover_pids "$m")
    [ -z "$pid" ] && break
    sleep 0.1
  done
  # shellcheck disable=SC2086
  [ -z "$pid" ] || kill -9 $pid 2>/dev/null || true
  as_owner touch "$H/$m/data/standby.signal"
  touch "$H/$m/fenced"
  log "old primary $m fenced: stopped, standby.signal written (a manual start comes up read-only), never started by this script again"
}

lsn_number() { # 16/B374D848 -> a 64-bit number; empty -> 0
  local l=${1:-0/0}
  [ -n "$l" ] || l=0/0
  echo $(( (0x${l%/*} << 32) + 0x${l#*/} ))
}

promote() {
  lock
  [ -f "$H/.initialised" ] || die "no cluster in $H; run start first"
  local force=${1:-} old new="" best=-1 m lsn n others survivor=""
  old=$(primary_name)
  if ! is_fenced "$old" && running "$old" && accepts_writes "$old"; then
    if [ "$force" != --force ]; then
      log "primary $old is running and accepts writes; nothing to do (promote --force fails over anyway)"
      print_env
      return 0
    fi
  fi
  is_fenced "$old" || fence "$old"
  for m in "${MEMBERS[@]}"; do
    [ "$m" = "$old" ] && continue
    is_fenced "$m" && continue
    if ! running "$m"; then log "standby $m is not running; not a candidate"; continue; fi
    if ! in_recovery "$m"; then new=$m; log "member $m is already promoted"; break; fi
    lsn=$(q "$m" "SELECT coalesce(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())")
    n=$(lsn_number "$lsn")
    log "standby $m: received WAL up to $lsn"
    if [ "$n" -gt "$best" ]; then best=$n; new=$m; fi
  done
  [ -n "$new" ] || die "no running standby to promote"
  others=()
  for m in "${MEMBERS[@]}"; do
    [ "$m" = "$old" ] || [ "$m" = "$new" ] || is_fenced "$m" || others+=("$m")
  done
  survivor=${others[0]:-}
  if [ -n "$survivor" ]; then
    q "$new" "ALTER SYSTEM SET synchronous_standby_names = 'ANY 1 ($survivor)'" >/dev/null
  else
    log "warning: no other standby; commits on $new wait (fail closed) until a standby streams from it"
    q "$new" "ALTER SYSTEM SET synchronous_standby_names = 'ANY 1 (s1, s2)'" >/dev/null
  fi
  q "$new" "SELECT pg_reload_conf()" >/dev/null
  if in_recovery "$new"; then
    as_owner "$BIN/pg_ctl" -D "$H/$new/data" -w -t 60 promote >/dev/null || die "pg_ctl promote of $new failed"
    log "standby $new promoted (highest received WAL position)"
  fi
  echo "$new" > "$H/primary"
  if [ -n "$survivor" ]; then
    q "$new" "SELECT pg_create_physical_replication_slot('$survivor', true) WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = '$survivor')" >/dev/null
    if running "$survivor"; then
      q "$survivor" "ALTER SYSTEM SET primary_conninfo = '$(conninfo_for "$new" "$survivor")'" >/dev/null
      q "$survivor" "ALTER SYSTEM SET primary_slot_name = '$survivor'" >/dev/null
      stop_member "$survivor" fast
    else
      log "standby $survivor is not running; re-pointing it at $new anyway"
      as_owner sh -c "printf '%s\n' \"primary_conninfo = '$(conninfo_for "$new" "$survivor")'\" \"primary_slot_name = '$survivor'\" >> '$H/$survivor/data/postgresql.auto.conf'"
    fi
    start_member "$survivor"
    if await_streaming "$survivor" 60; then
      log "standby $survivor re-pointed at $new and streaming; synchronous_standby_names = 'ANY 1 ($survivor)'"
    else
      log "warning: standby $survivor does not stream from $new yet; commits wait until it does"
    fi
  fi
  log "failover done: primary $new on 127.0.0.1:$(port_of "$new"), old primary $old fenced"
  print_env
}

rejoin() {
  lock
  [ -f "$H/.initialised" ] || die "no cluster in $H; run start first"
  local m=${1:-} pm other c
  pm=$(primary_name)
  if [ -z "$m" ]; then
    for c in "${MEMBERS[@]}"; do is_fenced "$c" && m=$c; done
    [ -n "$m" ] || die "no fenced member to rejoin"
  fi
  case " ${MEMBERS[*]} " in *" $m "*) ;; *) die "unknown member '$m' (${MEMBERS[*]})" ;; esac
  is_fenced "$m" || die "member $m is not fenced; only a fenced member (an old primary) rejoins"
  running "$pm" && accepts_writes "$pm" || die "the primary $pm is not running or does not accept writes"
  running "$m" && stop_member "$m" fast
  as_owner rm -f "$H/$m/data/standby.signal"
  # A promoted primary records its new timeline in its control file only at its next checkpoint;
  # before that pg_rewind sees one timeline and finds nothing to rewind.
  q "$pm" "CHECKPOINT" >/dev/null
  log "rewinding $m to the primary $pm's timeline (pg_rewind)"
  if ! as_owner env PGPASSFILE="$H/pgpass" "$BIN/pg_rewind" -D "$H/$m/data" \
      --source-server="host=127.0.0.1 port=$(port_of "$pm") user=weir dbname=postgres" >"$H/$m/rewind.log" 2>&1; then
    tail -n 5 "$H/$m/rewind.log" >&2 || true
    log "pg_rewind of $m failed; copying it again from $pm (pg_basebackup)"
    as_owner rm -rf "$H/$m/data"
    as_owner env PGPASSFILE="$H/pgpass" "$BIN/pg_basebackup" -D "$H/$m/data" -d "$(conninfo_for "$pm" "$m")" \
      -X stream -c fast >"$H/$m/basebackup.log" 2>&1 \
      || { cat "$H/$m/basebackup.log" >&2; die "pg_basebackup for $m failed (log above)"; }
  fi
  q "$pm" "SELECT pg_create_physical_replication_slot('$m', true) WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = '$m')" >/dev/null
  # pg_rewind copies the primary's configuration files: this member's own settings go last.
  as_owner sh -c "printf '%s\n' \"primary_conninfo = '$(conninfo_for "$pm" "$m")'\" \"primary_slot_name = '$m'\" \"synchronous_standby_names = ''\" >> '$H/$m/data/postgresql.auto.conf'"
  as_owner touch "$H/$m/data/standby.signal"
  rm -f "$H/$m/fenced"
  start_member "$m"
  await_streaming "$m" 120 || die "member $m does not stream from $pm (log: $H/$m/postgres.log)"
  # A standby whose timeline cannot follow the primary's connects, is told the WAL ended, and tries
  # again: it shows as streaming for moments. Caught up to the primary's position it really follows.
  local target i
  target=$(q "$pm" "SELECT pg_current_wal_lsn()")
  for ((i = 0; i < 300; i++)); do
    [ "$(q "$m" "SELECT pg_last_wal_replay_lsn() >= '$target'::pg_lsn" 2>/dev/null)" = t ] && break
    sleep 0.2
  done
  [ "$i" -lt 300 ] || die "member $m streams but does not replay $pm's WAL (log: $H/$m/postgres.log)"
  other=""
  for c in "${MEMBERS[@]}"; do [ "$c" = "$pm" ] || [ "$c" = "$m" ] || is_fenced "$c" || other=$c; done
  q "$pm" "ALTER SYSTEM SET synchronous_standby_names = 'ANY 1 (${other:+$other, }$m)'" >/dev/null
  q "$pm" "SELECT pg_reload_conf()" >/dev/null
  log "member $m rejoined as a standby of $pm and streams; synchronous_standby_names = 'ANY 1 (${other:+$other, }$m)'"
  print_env
}

destroy() {
  lock
  if [ -f "$H/.initialised" ]; then
    local m
    for m in "${MEMBERS[@]}"; do stop_member "$m" immediate; done
  fi
  local m
  if [ -d "$H" ]; then
    for m in "${MEMBERS[@]}"; do
      # shellcheck disable=SC2046
      [ -d "$H/$m/data" ] && kill -9 $(leftover_pids "$m") 2>/dev/null || true
    done
  fi
  rm -rf "$H"
  log "removed $H"
}

cmd=${1:-status}; shift || true
ensure_binaries
resolve_home
case "$cmd" in
  start) start ;;
  stop) lock; stop ;;
  status) status ;;
  env) [ -f "$H/.initialised" ] || die "no cluster in $H; run start first"; print_env ;;
  promote) promote "${1:-}" ;;
  kill-primary) kill_primary ;;
  rejoin) rejoin "${1:-}" ;;
  destroy) destroy ;;
  *) die "unknown command '$cmd' (start|stop|status|env|promote [--force]|kill-primary|rejoin [member]|destroy)" ;;
esac
