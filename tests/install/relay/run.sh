#!/usr/bin/env bash
# Relay: extract dist/relay/queuebox-*.tar.gz in an empty directory, `./queuebox migrate`,
# start it with the example configuration it ships (relay.example.yml), then POST a pull
# message (stored for a worker) and a push message (forwarded by the relay into the
# outbox under its topic) and check both rows in PostgreSQL.
set -euo pipefail
source tests/install/lib.sh
ffi_need_apt curl curl
tarball=$(ls "$dist"/relay/queuebox-*-x86_64-unknown-linux-gnu.tar.gz)
install_dir=$(install_workdir relay)
relay_pid=
trap '[ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null; wait 2>/dev/null; install_cleanup' EXIT
tar -xzf "$tarball" -C "$install_dir"
cd "$install_dir"/queuebox-*/
for f in queuebox LICENSE relay.example.yml migrations/postgres/0001_create_outbox.sql; do
  [ -e "$f" ] || { echo "install-relay: the tarball has no $f" >&2; exit 1; }
done
ldd queuebox | grep -q librdkafka && { echo "install-relay: the binary needs a system librdkafka" >&2; exit 1; }
install_db relay
port=$((20000 + RANDOM % 20000))
export QB_DEMO_DATABASE_URL="$install_db_url" QB_DEMO_PORT=$port QB_DEMO_RECEIVER=http://127.0.0.1:9
./queuebox --version
./queuebox migrate --database-url "$install_db_url"
./queuebox --config relay.example.yml >"$install_dir/relay.log" 2>&1 &
relay_pid=$!
for _ in $(seq 100); do curl -fs "http://127.0.0.1:$port/health/ready" >/dev/null && break; sleep 0.1; done
curl -fsS -H 'X-Job-Id: install-1' -d '{"total": 42}' "http://127.0.0.1:$port/inbox/jobs"; echo
curl -fsS -H 'Content-Type: application/json' -d '{"id":"install-2","type":"created","orderId":"o-1","total":42}' \
  "http://127.0.0.1:$port/inbox/orders"; echo
got=""
for _ in $(seq 100); do
  got=$(psql "$install_db_url" -X -tA -c "
    SELECT (SELECT consumption || ' ' || state || ' ' || (payload->>'total') FROM inbox WHERE source = 'jobs' AND idempotency_key = 'install-1')
        || ' / ' || (SELECT string_agg(topic, ',') FROM outbox)")
  [ "$got" = "pull pending 42 / orders.created" ] && break
  sleep 0.1
done
if [ "$got" != "pull pending 42 / orders.created" ]; then
  echo "install-relay: expected 'pull pending 42 / orders.created', got '$got'" >&2
  tail -20 "$install_dir/relay.log" >&2
  exit 1
fi
echo "install-relay: the packaged relay migrated, stored a pull row and forwarded a push row into the outbox"
