#!/usr/bin/env bash
# A throwaway TLS-only PostgreSQL for the TLS tests (relay/tests/tls_postgres.rs): makes a
# fresh CA, server and client certificates with openssl, starts a private cluster on
# 127.0.0.1:${QB_PG_TLS_PORT:-55433} (through scripts/postgres.sh) and then allows TCP
# connections only as `hostssl`:
#   user postgres: `cert` (a client certificate whose CN is the user, signed by the CA)
#   user app:      `scram-sha-256 clientcert=verify-full` (password app-secret AND a certificate)
# No plain `host` line: a connection without TLS is refused. The Unix socket in the data
# directory stays `trust` for this script's own set-up.
#   scripts/postgres-tls.sh start   -> certificates in $QB_PG_TLS_DIR.certs/
#   scripts/postgres-tls.sh stop    -> stops the cluster and removes it and its certificates
#   scripts/postgres-tls.sh env     -> QUEUEBOX_TEST_TLS_DATABASE_URL: user postgres with its
#                                      client certificate, sslmode=verify-full (the language
#                                      workers' TLS tests read it)
# Certificates (all PEM): ca.crt, server.crt (SAN localhost, 127.0.0.1; not 127.0.0.2),
# client-postgres.{crt,key}, client-app.{crt,key}, other-ca.crt (a CA nobody uses) and
# client-other.{crt,key} (CN postgres, signed by other-ca).
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${QB_PG_TLS_PORT:-55433}"
DIR="${QB_PG_TLS_DIR:-/tmp/queuebox-pg-tls-$PORT}"
CERTS="$DIR.certs"
pg() { QB_PG_PORT="$PORT" QB_PG_DIR="$DIR" bash scripts/postgres.sh "$1"; }
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# make_cert NAME CN ISSUER EXTENSIONS: NAME.key and NAME.crt signed by ISSUER.{crt,key}.
make_cert() {
  openssl req -new -newkey rsa:2048 -nodes -subj "/CN=$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
  printf '%s\n' "$4" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$3.crt" -CAkey "$3.key" -CAcreateserial -days 2 -sha256 \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

make_ca() {
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -sha256 -subj "/CN=$2" -keyout "$1.key" -out "$1.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}

start() {
  command -v openssl >/dev/null || { echo "postgres-tls: openssl is missing (apt-get install openssl)" >&2; exit 3; }
  pg stop; rm -rf "$DIR" "$CERTS"; mkdir -p "$CERTS"
  (
    cd "$CERTS"
    make_ca ca "QueueBox test CA"
    make_ca other-ca "Some other CA"
    local leaf="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment"
    make_cert server localhost ca "$leaf
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1"
    make_cert client-postgres postgres ca "$leaf
extendedKeyUsage=clientAuth"
    make_cert client-app app ca "$leaf
extendedKeyUsage=clientAuth"
    make_cert client-other postgres other-ca "$leaf
extendedKeyUsage=clientAuth"
    chmod 600 ./*.key
  )
  pg start  # plain and trust first: creates the cluster and the queuebox database
  psql -h 127.0.0.1 -p "$PORT" -U postgres -qc "CREATE ROLE app LOGIN PASSWORD 'app-secret'" \
    -c "ALTER DATABASE queuebox OWNER TO app" >/dev/null
  install -m 600 "$CERTS/server.key" "$DIR/server.key"
  install -m 644 "$CERTS/server.crt" "$CERTS/ca.crt" "$DIR/"
  [ "$(id -u)" = 0 ] && chown postgres "$DIR/server.key" "$DIR/server.crt" "$DIR/ca.crt"
  cat >>"$DIR/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1,127.0.0.2'
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
ssl_ca_file = 'ca.crt'
log_connections = on
CONF
  cat >"$DIR/pg_hba.conf" <<HBA
local   all  all                 trust
hostssl all  postgres 127.0.0.0/8 cert
hostssl all  app      127.0.0.0/8 scram-sha-256 clientcert=verify-full
HBA
  local bin; bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  as_pg "$bin/pg_ctl" -D "$DIR" -l "$DIR/server.log" -w -t 60 restart >/dev/null || {
    echo "postgres-tls: the TLS cluster on port $PORT did not restart; its log says:" >&2
    tail -n 20 "$DIR/server.log" >&2 || true
    exit 1
  }
  for _ in $(seq 1 60); do "$bin/pg_isready" -h 127.0.0.1 -p "$PORT" -q && break; sleep 0.5; done
  echo "postgres-tls: TLS-only cluster on 127.0.0.1:$PORT, certificates in $CERTS" >&2
}

case "${1:-start}" in
  start) start ;;
  stop) pg stop; rm -rf "$DIR" "$CERTS" ;;
  env) echo "export QUEUEBOX_TEST_TLS_DATABASE_URL='postgres://postgres@localhost:$PORT/queuebox?sslmode=verify-full&sslrootcert=$CERTS/ca.crt&sslcert=$CERTS/client-postgres.crt&sslkey=$CERTS/client-postgres.key'" ;;
  *) echo "usage: scripts/postgres-tls.sh [start|stop|env]" >&2; exit 2 ;;
esac
