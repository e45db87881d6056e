#!/usr/bin/env bash
# Keeps every core busy, to run the tests as on a loaded machine (docs/testing.md).
#
#   deploy/bin/cpu-hog.sh start [N]   start N busy loops (default: one per core), in the background
#   deploy/bin/cpu-hog.sh stop        stop them
#   deploy/bin/cpu-hog.sh status      running or not
#   deploy/bin/cpu-hog.sh run CMD...  start the loops, run CMD, stop the loops (also when CMD fails
#                                     or is interrupted) and exit with CMD's status
#
# Each loop is a shell spinning at normal priority; their pids are kept in .weir/cpu-hog.pids.
# A loop also ends by itself after WEIR_HOG_MAX_SECONDS (default 7200), so none outlives a
# forgotten session.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
pids=$repo/.weir/cpu-hog.pids
mkdir -p "$repo/.weir"

running_pids() {
  [ -f "$pids" ] || return 0
  local p
  while read -r p; do kill -0 "$p" 2>/dev/null && echo "$p"; done < "$pids"
}

start() {
  local n=${1:-$(nproc)}
  case "$n" in ''|*[!0-9]*) echo "cpu-hog.sh: N must be a number" >&2; exit 2 ;; esac
  if [ -n "$(running_pids)" ]; then echo "cpu-hog.sh: already running ($(running_pids | wc -l) loops)"; return; fi
  local max=${WEIR_HOG_MAX_SECONDS:-7200}
  : > "$pids"
  for _ in $(seq 1 "$n"); do
    # The loop checks the clock only every 100,000 turns, so nearly all of its time is spinning.
    nohup bash -c 'end=$((SECONDS + '"$max"')); while [ $SECONDS -lt $end ]; do for ((i = 0; i < 100000; i++)); do :; done; done' \
      >/dev/null 2>&1 < /dev/null &
    echo $! >> "$pids"
  done
  echo "cpu-hog.sh: $n busy loops started (pids $(tr '\n' ' ' < "$pids")); stop with deploy/bin/cpu-hog.sh stop"
}

stop() {
  local p any=""
  for p in $(running_pids); do kill "$p" 2>/dev/null || true; any=yes; done
  rm -f "$pids"
  if [ -n "$any" ]; then echo "cpu-hog.sh: stopped"; else echo "cpu-hog.sh: was not running"; fi
}

case "${1:-status}" in
  start) start "${2:-}" ;;
  stop) stop ;;
  status)
    n=$(running_pids | wc -l)
    if [ "$n" -gt 0 ]; then echo "cpu-hog.sh: $n busy loops running"; else echo "cpu-hog.sh: not running"; exit 3; fi ;;
  run)
    shift
    [ $# -gt 0 ] || { echo "usage: deploy/bin/cpu-hog.sh run CMD..." >&2; exit 2; }
    start
    trap stop EXIT
    uptime
    started=$SECONDS
    set +e
    "$@"
    rc=$?
    set -e
    echo "cpu-hog.sh: the command took $((SECONDS - started)) s under the hog, exit status $rc"
    uptime
    exit "$rc" ;;
  *) echo "usage: deploy/bin/cpu-hog.sh start [N]|stop|status|run CMD..." >&2; exit 2 ;;
esac
