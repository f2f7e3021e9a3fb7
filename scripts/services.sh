# Find or start the PostgreSQL, Redis and RabbitMQ that the test suite needs. Sourced by scripts/test.sh.
#
# Order: TEST_DATABASE_URL / TEST_REDIS_URL / TEST_RABBITMQ_URL from the environment; else the servers
# answering on 127.0.0.1:5432 (database `test`, trust auth), 127.0.0.1:6379 and 127.0.0.1:5672
# (guest/guest); else install them from Debian's packages and start private ones on loopback ports that
# do not clash, stopped by stop_own_services. PODIUM_TEST_OWN_SERVICES=1 skips the probing and always
# starts private servers. The fault tests (tests/faults) start throwaway servers of their own from the
# same binaries, so redis-server and PostgreSQL's server binaries are installed even when servers answer.

OWN_PG_PORT=${OWN_PG_PORT:-55432}
OWN_REDIS_PORT=${OWN_REDIS_PORT:-56379}
OWN_RABBITMQ_PORT=${OWN_RABBITMQ_PORT:-56720}
OWN_RABBITMQ_NODE=${OWN_RABBITMQ_NODE:-podium-test@localhost}
OWN_RABBITMQ_STARTED=""
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

start_own_rabbitmq() {
  local dir
  command -v rabbitmq-server >/dev/null || apt_install rabbitmq-server || return 1
  dir="$(services_dir)/rabbitmq"
  mkdir -p "$dir/mnesia" "$dir/log"
  echo "[]." >"$dir/enabled_plugins"
  # Its own config file: Debian's /etc/rabbitmq/rabbitmq.conf may pin the listener to 5672.
  echo "listeners.tcp.local = 127.0.0.1:$OWN_RABBITMQ_PORT" >"$dir/rabbitmq.conf"
  id rabbitmq >/dev/null 2>&1 && chown -R rabbitmq "$dir"
  export RABBITMQ_NODENAME="$OWN_RABBITMQ_NODE" RABBITMQ_DIST_PORT=$((OWN_RABBITMQ_PORT + 1)) \
    RABBITMQ_MNESIA_BASE="$dir/mnesia" RABBITMQ_LOG_BASE="$dir/log" RABBITMQ_PID_FILE="$dir/pid" \
    RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf"
  rabbitmq-server -detached >"$dir/start.log" 2>&1 || { cat "$dir/start.log" >&2; return 1; }
  OWN_RABBITMQ_STARTED="$dir"
  local i
  for i in $(seq 1 600); do port_answers 127.0.0.1 "$OWN_RABBITMQ_PORT" && break; sleep 0.1; done
  port_answers 127.0.0.1 "$OWN_RABBITMQ_PORT" || { tail -20 "$dir"/log/*.log >&2; return 1; }
  export TEST_RABBITMQ_URL="amqp://guest:guest@127.0.0.1:$OWN_RABBITMQ_PORT//" TEST_RABBITMQ_NODE="$OWN_RABBITMQ_NODE"
  log "started RabbitMQ on 127.0.0.1:$OWN_RABBITMQ_PORT (node $OWN_RABBITMQ_NODE)"
}

# Binaries the fault tests run themselves (throwaway servers to kill and restart).
ensure_fault_test_binaries() {
  command -v redis-server >/dev/null || apt_install redis-server || return 1
  pg_bin_dir >/dev/null || apt_install postgresql || return 1
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
  if [ -n "$OWN_RABBITMQ_STARTED" ]; then
    rabbitmqctl -n "$OWN_RABBITMQ_NODE" stop >/dev/null 2>&1 || true
    log "stopped our RabbitMQ"
    OWN_RABBITMQ_STARTED=""
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
  if [ -z "${TEST_RABBITMQ_URL:-}" ]; then
    if [ "${PODIUM_TEST_OWN_SERVICES:-0}" != "1" ] && port_answers 127.0.0.1 5672; then
      export TEST_RABBITMQ_URL="amqp://guest:guest@127.0.0.1:5672//"
      log "using RabbitMQ on 127.0.0.1:5672"
    else
      start_own_rabbitmq || { log "could not start RabbitMQ"; return 1; }
    fi
  else
    log "using TEST_RABBITMQ_URL from the environment"
  fi
  ensure_fault_test_binaries || { log "could not install redis-server and postgresql for the fault tests"; return 1; }
}
