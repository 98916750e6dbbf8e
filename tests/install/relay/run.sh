#!/usr/bin/env bash
# Relay: for each dist/relay/queuebox-<v>-<triple>.tar.gz, extract it in an empty directory,
# `./queuebox migrate`, start it with the example configuration it ships
# (relay.example.yml), then POST a pull message (stored for a worker) and a push message
# (forwarded by the relay into the outbox under its topic) and check both rows in
# PostgreSQL. Then `./queuebox migrate` once more over TLS (scripts/postgres-tls.sh: a
# TLS-only cluster, verify-full with its CA and a client certificate), and refused with a CA
# that did not sign the server's certificate: the binary's own TLS stack (rustls, ring, the
# static musl build's too) verifies. The aarch64 binary runs under qemu-user; the x86_64
# musl one is static and runs as is.
set -euo pipefail
source tests/install/lib.sh
ffi_need_apt curl curl
tarballs=("$dist"/relay/queuebox-*.tar.gz)
[ -e "${tarballs[0]}" ] || { echo "install-relay: no tarball in $dist/relay" >&2; exit 1; }
install_dir=$(install_workdir relay)
relay_pid=
tls_port=
# The TLS cluster's directory: the postgres user must reach it (the install dir is 0700).
tls_pg() { QB_PG_TLS_PORT=$tls_port QB_PG_TLS_DIR="/tmp/qb-install-relay-tls-$tls_port" bash "$repo/scripts/postgres-tls.sh" "$1"; }
trap '[ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null; wait 2>/dev/null; [ -n "$tls_port" ] && tls_pg stop >/dev/null 2>&1; install_cleanup' EXIT

# relay_tls_migrate <triple> <runner>: migrate over TLS, then refused with the wrong CA.
relay_tls_migrate() {
  local certs url err
  if [ -z "$tls_port" ]; then
    tls_port=$((20000 + RANDOM % 20000))
    tls_pg start >/dev/null 2>&1 || { tls_pg start >&2; return 1; }
  fi
  certs="/tmp/qb-install-relay-tls-$tls_port.certs"
  url="postgres://postgres@localhost:$tls_port/queuebox?sslmode=verify-full&sslcert=$certs/client-postgres.crt&sslkey=$certs/client-postgres.key"
  $2 ./queuebox migrate --database-url "$url&sslrootcert=$certs/ca.crt" >/dev/null
  [ "$(psql "$url&sslrootcert=$certs/ca.crt" -X -tA -c 'SELECT count(*) > 0 FROM queuebox_schema_history')" = t ] ||
    { echo "install-relay ($1): migrate over TLS left no schema history" >&2; return 1; }
  if err=$($2 ./queuebox migrate --database-url "$url&sslrootcert=$certs/other-ca.crt" 2>&1); then
    echo "install-relay ($1): migrate over TLS with a CA that did not sign the server passed" >&2; return 1
  fi
  echo "install-relay ($1): migrate over TLS (verify-full, client certificate) passed; with another CA refused: $(echo "$err" | grep -m1 -oiE '[^:]*(certificate|issuer)[^.]*' || echo "$err" | tail -1)"
}

# relay_quickstart <tarball>: the quick start with one tarball's binary.
relay_quickstart() {
  local triple run dir port got
  triple=$(basename "$1" .tar.gz | sed 's/^queuebox-[^-]*-//')
  tar -xzf "$1" -C "$install_dir"
  dir=$(echo "$install_dir"/queuebox-*-"$triple")
  for f in queuebox LICENSE relay.example.yml migrations/postgres/0001_create_outbox.sql; do
    [ -e "$dir/$f" ] || { echo "install-relay: the $triple tarball has no $f" >&2; return 1; }
  done
  readelf -d "$dir/queuebox" | grep -q 'NEEDED.*librdkafka' &&
    { echo "install-relay: the $triple binary needs a system librdkafka" >&2; return 1; }
  if ! run=$(install_runner "$triple"); then
    echo "install-relay ($triple): packaged; not run (no qemu-user for $triple here)"
    return 0
  fi
  cd "$dir"
  install_db relay
  port=$((20000 + RANDOM % 20000))
  export QB_DEMO_DATABASE_URL="$install_db_url" QB_DEMO_PORT=$port QB_DEMO_RECEIVER=http://127.0.0.1:9
  $run ./queuebox --version
  $run ./queuebox migrate --database-url "$install_db_url"
  $run ./queuebox --config relay.example.yml >"$install_dir/relay-$triple.log" 2>&1 &
  relay_pid=$!
  # Under qemu the relay starts in seconds, not tenths.
  for _ in $(seq 300); do curl -fs "http://127.0.0.1:$port/health/ready" >/dev/null && break; sleep 0.1; done
  curl -fsS -H 'X-Job-Id: install-1' -d '{"total": 42}' "http://127.0.0.1:$port/inbox/jobs"; echo
  curl -fsS -H 'Content-Type: application/json' -d '{"id":"install-2","type":"created","orderId":"o-1","total":42}' \
    "http://127.0.0.1:$port/inbox/orders"; echo
  got=""
  for _ in $(seq 300); do
    got=$(psql "$install_db_url" -X -tA -c "
      SELECT (SELECT consumption || ' ' || state || ' ' || (payload->>'total') FROM inbox WHERE source = 'jobs' AND idempotency_key = 'install-1')
          || ' / ' || (SELECT string_agg(topic, ',') FROM outbox)")
    [ "$got" = "pull pending 42 / orders.created" ] && break
    sleep 0.1
  done
  kill "$relay_pid"; wait "$relay_pid" 2>/dev/null || true; relay_pid=
  if [ "$got" != "pull pending 42 / orders.created" ]; then
    echo "install-relay ($triple): expected 'pull pending 42 / orders.created', got '$got'" >&2
    tail -20 "$install_dir/relay-$triple.log" >&2
    return 1
  fi
  ffi_drop_db "$install_db_name"; install_db_name=
  echo "install-relay ($triple): the packaged relay migrated, stored a pull row and forwarded a push row into the outbox"
  relay_tls_migrate "$triple" "$run"
  cd "$repo"
}

for tarball in "${tarballs[@]}"; do relay_quickstart "$tarball"; done
