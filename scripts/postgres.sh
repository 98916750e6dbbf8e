#!/usr/bin/env bash
# Installs (from Debian's packages, if missing) and starts a throwaway PostgreSQL cluster on
# 127.0.0.1:${QB_PG_PORT:-55432} with trust auth, owned by this checkout. Idempotent.
#   source scripts/postgres.sh   -> exports QUEUEBOX_TEST_DATABASE_URL
#   scripts/postgres.sh stop
#   scripts/postgres.sh clean    -> drops the test databases (qb_*) every test run leaves
set -euo pipefail
QB_PG_PORT="${QB_PG_PORT:-55432}"
QB_PG_DIR="${QB_PG_DIR:-/tmp/queuebox-pg-$QB_PG_PORT}"

qb_pg_bin() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
  if [ -z "$d" ]; then
    echo "postgres: installing PostgreSQL from Debian's packages" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 && apt-get install -y -qq postgresql >&2
    d=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  fi
  echo "$d"
}

qb_pg_as() {  # run as the postgres OS user when we are root (initdb refuses root)
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# The test ports (55432 here, 55433-55439 for the per-language TLS clusters) lie inside Linux's
# ephemeral range 32768-60999: an earlier test's outgoing connection can hold one as its local
# port, and then pg_ctl fails with "could not start server" (seen once in CI on 55436). Reserve
# the whole block when we may, the first time any cluster starts, so the kernel never hands them out.
qb_pg_reserve_ports() {
  local f=/proc/sys/net/ipv4/ip_local_reserved_ports cur
  [ -w "$f" ] || return 0
  cur=$(cat "$f")
  case ",$cur," in *",55432-55439,"*) return 0 ;; esac
  echo "${cur:+$cur,}55432-55439,$QB_PG_PORT" >"$f" 2>/dev/null || true
}

qb_pg_start() {
  local bin; bin=$(qb_pg_bin)
  qb_pg_reserve_ports
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then useradd -r -m postgres; fi
  if [ ! -s "$QB_PG_DIR/PG_VERSION" ]; then
    mkdir -p "$QB_PG_DIR"; [ "$(id -u)" = 0 ] && chown postgres "$QB_PG_DIR"
    qb_pg_as "$bin/initdb" -D "$QB_PG_DIR" -U postgres --auth=trust -E UTF8 >/dev/null
    cat >>"$QB_PG_DIR/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $QB_PG_PORT
unix_socket_directories = '$QB_PG_DIR'
max_connections = 400
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 256MB
# CREATE DATABASE writes its template (8 MB) to WAL; recycle it sooner than the 1 GB default.
max_wal_size = 256MB
CONF
  fi
  if ! qb_pg_as "$bin/pg_ctl" -D "$QB_PG_DIR" status >/dev/null 2>&1; then
    qb_pg_as "$bin/pg_ctl" -D "$QB_PG_DIR" -l "$QB_PG_DIR/server.log" -w -t 60 start >/dev/null || {
      echo "postgres: the cluster on port $QB_PG_PORT did not start; its log says:" >&2
      tail -n 20 "$QB_PG_DIR/server.log" >&2 || true
      return 1
    }
  fi
  for _ in $(seq 1 60); do
    "$bin/pg_isready" -h 127.0.0.1 -p "$QB_PG_PORT" -q && break; sleep 0.5
  done
  psql -h 127.0.0.1 -p "$QB_PG_PORT" -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname='queuebox'" | grep -q 1 \
    || psql -h 127.0.0.1 -p "$QB_PG_PORT" -U postgres -qc "CREATE DATABASE queuebox" >/dev/null
  export QUEUEBOX_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$QB_PG_PORT/queuebox"
  echo "postgres: ready at $QUEUEBOX_TEST_DATABASE_URL (data in $QB_PG_DIR)" >&2
}

qb_pg_stop() {
  local bin; bin=$(qb_pg_bin)
  qb_pg_as "$bin/pg_ctl" -D "$QB_PG_DIR" -m fast stop >/dev/null 2>&1 || true
}

# Each test makes a database of its own (qb_<suite>_<random>) and leaves it behind, about
# 8 MB each: a whole test run leaves hundreds, enough to fill a small CI disk (stop 47's CI
# did, in its acceptance part). scripts/test.sh calls this after every part.
qb_pg_clean() {
  local url="postgres://postgres@127.0.0.1:$QB_PG_PORT/postgres" names
  names=$(psql "$url" -XAtc "SELECT datname FROM pg_database WHERE datname LIKE 'qb\_%'") || return 1
  for n in $names; do
    PGOPTIONS=--client-min-messages=warning psql "$url" -Xqc "DROP DATABASE IF EXISTS \"$n\" WITH (FORCE)" >/dev/null || return 1
  done
  echo "postgres: dropped $(echo "$names" | grep -c . || true) test databases" >&2
}

case "${1:-start}" in
  start) qb_pg_start ;;
  stop) qb_pg_stop ;;
  clean) qb_pg_clean ;;
  *) echo "usage: scripts/postgres.sh [start|stop|clean]" >&2; exit 2 ;;
esac
