# Shared helpers for deploy/bin scripts. Sourced, not run.

# Java 17+ and Maven 3.8+: installed with apt-get when missing and running as root, otherwise the
# script says what to install.
weir_require_build_tools() {
  local missing=()
  if ! command -v java >/dev/null 2>&1 || ! java -version 2>&1 | grep -qE 'version "(1[7-9]|[2-9][0-9])'; then
    missing+=(openjdk-17-jdk-headless)
  fi
  command -v mvn >/dev/null 2>&1 || missing+=(maven)
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "weir: installing ${missing[*]} with apt-get" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
  else
    echo "weir: missing ${missing[*]}; install with: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
}

# Debian's chromium, the headless browser of the console's end-to-end test (ConsoleIT): installed
# with apt-get when missing and running as root; otherwise the script says what to install (and
# ConsoleIT fails saying the same). $WEIR_CHROMIUM may name another Chromium binary.
weir_require_browser() {
  if [ -n "${WEIR_CHROMIUM:-}" ] && [ -x "$WEIR_CHROMIUM" ]; then return 0; fi
  command -v chromium >/dev/null 2>&1 && return 0
  [ -x /usr/bin/chromium ] && return 0
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "weir: installing chromium with apt-get (the headless browser of the console test)" >&2
    if ! { DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2; }; then
      echo "weir: apt-get could not install chromium; the console test (ConsoleIT) needs it:" \
        "apt-get install -y chromium, or set WEIR_CHROMIUM to a Chromium binary" >&2
      exit 1
    fi
  else
    echo "weir: chromium is missing; the console test (ConsoleIT) will fail without it." \
      "Install it with: sudo apt-get install chromium (or set WEIR_CHROMIUM to a Chromium binary)" >&2
  fi
}

weir_port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# First free loopback port at or above $1.
weir_free_port() {
  local p=$1
  while weir_port_in_use "$p"; do p=$((p + 1)); done
  echo "$p"
}

# --- PostgreSQL client side (backup.sh, restore.sh) ---

# Sets PG_CLIENT_BIN to a folder holding pg_dump, pg_restore and psql: $WEIR_PG_BINDIR (pg.sh
# exports it), else the newest /usr/lib/postgresql/<major>/bin, else the PATH. Installs nothing:
# says exactly what is missing.
weir_pg_client_tools() {
  local tool d v best="" best_v=0
  if [ -n "${WEIR_PG_BINDIR:-}" ] && [ -x "$WEIR_PG_BINDIR/pg_dump" ]; then
    PG_CLIENT_BIN=$WEIR_PG_BINDIR
  else
    for d in /usr/lib/postgresql/*/bin; do
      [ -x "$d/pg_dump" ] || continue
      v=$(basename "$(dirname "$d")")
      if [ "$v" -gt "$best_v" ] 2>/dev/null; then best=$d; best_v=$v; fi
    done
    if [ -n "$best" ]; then
      PG_CLIENT_BIN=$best
    elif command -v pg_dump >/dev/null 2>&1; then
      PG_CLIENT_BIN=$(dirname "$(command -v pg_dump)")
    else
      PG_CLIENT_BIN=""
    fi
  fi
  for tool in "$@"; do
    if [ -z "$PG_CLIENT_BIN" ] || [ ! -x "$PG_CLIENT_BIN/$tool" ]; then
      echo "weir: $tool not found (looked in \$WEIR_PG_BINDIR, /usr/lib/postgresql/*/bin and the PATH)." >&2
      echo "weir: install the PostgreSQL client tools of the server's major version or newer," \
        "e.g. on Debian: apt-get install postgresql-client (or postgresql-client-<major>)," \
        "or set WEIR_PG_BINDIR to the folder holding $tool" >&2
      exit 1
    fi
  done
}

# Turns WEIR_PG_URL (a pgjdbc URL, as a node uses it) into a libpq connection URI in PG_CONNINFO, and
# exports PGUSER / PGPASSWORD from WEIR_PG_USER / WEIR_PG_PASSWORD (the password never reaches a
# command line). Understood: jdbc:postgresql://host[:port][,host[:port]...]/database[?params] with
# targetServerType=primary|master (-> target_session_attrs=read-write), sslmode, sslrootcert,
# ssl=true (-> sslmode=verify-full, pgjdbc's default for it), user, connectTimeout. Other pgjdbc
# parameters are left out; libpq's PG* environment variables still apply.
weir_pg_conninfo() {
  local app=$1 url=${WEIR_PG_URL:-}
  [ -n "$url" ] || { echo "weir: WEIR_PG_URL is not set (the JDBC URL the nodes use, e.g. from: eval \"\$(deploy/bin/pg.sh env)\")" >&2; exit 1; }
  local re='^jdbc:postgresql://([^/?]*)/([^?]*)(\?(.*))?$'
  if [[ ! $url =~ $re ]]; then
    echo "weir: WEIR_PG_URL is not of the form jdbc:postgresql://host[:port][,host[:port]...]/database[?params]" >&2
    exit 1
  fi
  local hosts=${BASH_REMATCH[1]} database=${BASH_REMATCH[2]} query=${BASH_REMATCH[4]:-}
  [ -n "$hosts" ] || hosts=localhost
  [ -n "$database" ] || { echo "weir: WEIR_PG_URL names no database" >&2; exit 1; }
  local hosts_re='^[]A-Za-z0-9._:,[-]+$' db_re='^[A-Za-z0-9_.-]+$'
  if [[ ! $hosts =~ $hosts_re ]] || [[ ! $database =~ $db_re ]]; then
    echo "weir: WEIR_PG_URL's hosts or database name hold characters these scripts do not pass on; use a plain name" >&2
    exit 1
  fi
  local params=("application_name=$app") pair key value sslmode="" ssl="" url_user=""
  local IFS='&'
  for pair in $query; do
    key=${pair%%=*}; value=${pair#*=}
    case "$key" in
      targetServerType) case "$value" in primary|master) params+=("target_session_attrs=read-write") ;; esac ;;
      sslmode) sslmode=$value ;;
      ssl) ssl=$value ;;
      sslrootcert) params+=("sslrootcert=$value") ;;
      connectTimeout) params+=("connect_timeout=$value") ;;
      user) url_user=$value ;;
    esac
  done
  unset IFS
  if [ -n "$sslmode" ]; then params+=("sslmode=$sslmode"); elif [ "$ssl" = true ]; then params+=("sslmode=verify-full"); fi
  local joined; joined=$(IFS='&'; echo "${params[*]}")
  PG_CONNINFO="postgresql://$hosts/$database?$joined"
  PG_DATABASE=$database
  export PGUSER=${WEIR_PG_USER:-${url_user:-weir}}
  if [ -n "${WEIR_PG_PASSWORD:-}" ]; then export PGPASSWORD=$WEIR_PG_PASSWORD; fi
}

# The major version of the server behind PG_CONNINFO; pg_dump must be at least as new.
weir_pg_check_client_version() {
  local server client
  server=$("$PG_CLIENT_BIN/psql" "$PG_CONNINFO" -XAtqc "SELECT current_setting('server_version_num')::int / 10000") \
    || { echo "weir: cannot connect to PostgreSQL at WEIR_PG_URL as $PGUSER (psql's message above)" >&2; exit 1; }
  client=$("$PG_CLIENT_BIN/pg_dump" --version | sed -E 's/^[^0-9]*([0-9]+).*/\1/')
  if [ "$client" -lt "$server" ]; then
    echo "weir: the server is PostgreSQL $server but $PG_CLIENT_BIN/pg_dump is $client; install" \
      "postgresql-client-$server (or newer) or set WEIR_PG_BINDIR to its bin folder" >&2
    exit 1
  fi
  PG_SERVER_MAJOR=$server
}
