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

weir_port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# First free loopback port at or above $1.
weir_free_port() {
  local p=$1
  while weir_port_in_use "$p"; do p=$((p + 1)); done
  echo "$p"
}
