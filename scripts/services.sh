# Find or start the PostgreSQL and Redis that the test suite needs. Sourced by scripts/test.sh.
#
# Order: TEST_DATABASE_URL / TEST_REDIS_URL from the environment; else the servers answering on
# 127.0.0.1:5432 (database `test`, trust auth) and 127.0.0.1:6379; else install them from Debian's
# packages and start private ones on loopback ports that do not clash, stopped by stop_own_services.
# PODIUM_TEST_OWN_SERVICES=1 skips the probing and always starts private servers.

OWN_PG_PORT=${OWN_PG_PORT:-55432}
OWN_REDIS_PORT=${OWN_REDIS_PORT:-56379}
OWN_SERVICES_DIR=""
OWN_PG_STARTED=""
OWN_REDIS_STARTED=""

log() { echo "[services] $*" >&2; }

port_answers() {  # host port
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

apt_install() {  # packages...
  if [ "$(id -u)" != "0" ]; then
    log "need root to apt-get install $*; install them, or set TEST_DATABASE_URL and TEST_REDIS_URL"
    return 1
  fi
  log "installing $* from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

pg_bin_dir() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && { echo "$d"; return 0; }
  done
  return 1
}

services_dir() {
  if [ -z "$OWN_SERVICES_DIR" ]; then
    OWN_SERVICES_DIR=$(mktemp -d /tmp/podium-services.XXXXXX)
    chmod 755 "$OWN_SERVICES_DIR"
  fi
  echo "$OWN_SERVICES_DIR"
}

start_own_postgres() {
  local bin dir
  bin=$(pg_bin_dir) || { apt_install postgresql && bin=$(pg_bin_dir); } || return 1
  dir="$(services_dir)/pg"
  mkdir -p "$dir/data" "$dir/socket"
  # initdb refuses to run as root: the cluster belongs to the postgres user.
  local as=()
  if [ "$(id -u)" = "0" ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
    chown -R postgres "$dir"
    as=(runuser -u postgres --)
  fi
  "${as[@]}" "$bin/initdb" -D "$dir/data" -A trust -U postgres >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2; return 1; }
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $OWN_PG_PORT -c listen_addresses=127.0.0.1 -k $dir/socket -c fsync=off" start >/dev/null || {
    cat "$dir/server.log" >&2; return 1; }
  OWN_PG_STARTED="$bin|$dir"
  "${as[@]}" "$bin/createdb" -h 127.0.0.1 -p "$OWN_PG_PORT" -U postgres test
  export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$OWN_PG_PORT/test"
  log "started PostgreSQL on 127.0.0.1:$OWN_PG_PORT ($dir)"
}

start_own_redis() {
  local dir
  command -v redis-server >/dev/null || apt_install redis-server || return 1
  dir="$(services_dir)/redis"
  mkdir -p "$dir"
  redis-server --port "$OWN_REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
    --dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" || return 1
  local i
  for i in $(seq 1 50); do port_answers 127.0.0.1 "$OWN_REDIS_PORT" && break; sleep 0.1; done
  OWN_REDIS_STARTED="$dir"
  export TEST_REDIS_URL="redis://127.0.0.1:$OWN_REDIS_PORT/0"
  log "started Redis on 127.0.0.1:$OWN_REDIS_PORT"
}

stop_own_services() {
  if [ -n "$OWN_PG_STARTED" ]; then
    local bin=${OWN_PG_STARTED%%|*} dir=${OWN_PG_STARTED#*|}
    local as=()
    [ "$(id -u)" = "0" ] && as=(runuser -u postgres --)
    "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
    log "stopped our PostgreSQL"
    OWN_PG_STARTED=""
  fi
  if [ -n "$OWN_REDIS_STARTED" ]; then
    [ -f "$OWN_REDIS_STARTED/redis.pid" ] && kill "$(cat "$OWN_REDIS_STARTED/redis.pid")" 2>/dev/null || true
    log "stopped our Redis"
    OWN_REDIS_STARTED=""
  fi
  [ -n "$OWN_SERVICES_DIR" ] && rm -rf "$OWN_SERVICES_DIR"
  OWN_SERVICES_DIR=""
}

find_or_start_services() {
  if [ -z "${TEST_DATABASE_URL:-}" ]; then
    if [ "${PODIUM_TEST_OWN_SERVICES:-0}" != "1" ] && port_answers 127.0.0.1 5432 &&
      .venv/bin/python -c "import psycopg; psycopg.connect('postgresql://postgres@127.0.0.1:5432/test', connect_timeout=3).close()" 2>/dev/null; then
      export TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/test"
      log "using PostgreSQL on 127.0.0.1:5432"
    else
      start_own_postgres || { log "could not start PostgreSQL"; return 1; }
    fi
  else
    log "using TEST_DATABASE_URL from the environment"
  fi
  if [ -z "${TEST_REDIS_URL:-}" ]; then
    if [ "${PODIUM_TEST_OWN_SERVICES:-0}" != "1" ] && port_answers 127.0.0.1 6379; then
      export TEST_REDIS_URL="redis://127.0.0.1:6379/0"
      log "using Redis on 127.0.0.1:6379"
    else
      start_own_redis || { log "could not start Redis"; return 1; }
    fi
  else
    log "using TEST_REDIS_URL from the environment"
  fi
}
